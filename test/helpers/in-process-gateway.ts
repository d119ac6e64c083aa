import pino from "pino";
import type { Config } from "../../src/config/schema.js";
import { createAgentParts } from "../../src/gateway/agent-wiring.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { createCrashPoint } from "../../src/lib/crash-point.js";

/**
 * A real Gateway in this process (SQLite store, runner, agent, HTTP on the configured port —
 * use KEEL_HTTP_PORT=0), as `keel gateway run` builds it but without signals, a supervisor or a
 * successor on restart.
 */
export function createTestGateway(config: Config, options: { now?: () => number } = {}): Gateway {
  const logger = pino({ level: "silent" });
  return new Gateway({
    config,
    logger,
    agent: createAgentParts(config, logger),
    crashPoint: createCrashPoint(undefined),
    version: "test",
    supervisor: null,
    relaunch: () => {
      throw new Error("test gateways are not relaunched");
    },
    ...(options.now && { now: options.now }),
  });
}

/** Planned stop; resolves with the exit code once everything is closed. */
export async function stopTestGateway(gateway: Gateway | undefined): Promise<number | undefined> {
  if (!gateway) return undefined;
  gateway.requestStop({ restart: false, signalInitiated: false });
  return gateway.exited;
}
