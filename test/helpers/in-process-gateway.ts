import pino from "pino";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import { createAgentParts } from "../../src/gateway/agent-wiring.js";
import type { Supervisor } from "../../src/gateway/exit-code.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { createCrashPoint } from "../../src/lib/crash-point.js";
import type { InboundMessage, PlatformAdapter } from "../../src/platforms/platform.js";
import { RecordingAdapter } from "./recording-adapter.js";

/**
 * A real Gateway in this process (SQLite store, runner, agent, HTTP on the configured port —
 * use KEEL_HTTP_PORT=0), as `keel gateway run` builds it but without signals, and never spawning
 * a successor on restart.
 */
export function createTestGateway(
  config: Config,
  options: { now?: () => number; supervisor?: Supervisor; extraAdapters?: PlatformAdapter[] } = {},
): Gateway {
  const logger = pino({ level: "silent" });
  return new Gateway({
    config,
    logger,
    agent: createAgentParts(config, logger),
    crashPoint: createCrashPoint(undefined),
    version: "test",
    supervisor: options.supervisor ?? null,
    relaunch: () => {
      throw new Error("in-process test gateways must not spawn a detached successor");
    },
    ...(options.extraAdapters && { extraAdapters: options.extraAdapters }),
    ...(options.now && { now: options.now }),
  });
}

/** Planned stop; resolves with the exit code once everything is closed. */
export async function stopTestGateway(gateway: Gateway | undefined): Promise<number | undefined> {
  if (!gateway) return undefined;
  gateway.requestStop({ restart: false, signalInitiated: false });
  return gateway.exited;
}

/** A test platform that also counts how often the gateway disconnected it. */
export class CountingAdapter extends RecordingAdapter {
  stops = 0;
  override async stop(): Promise<void> {
    this.stops += 1;
    await super.stop();
  }
}

export interface InProcessGatewayOptions {
  home: string;
  /** Base URL of the fake model server (`startFakeOpenAI().baseUrl`); omit for no model. */
  modelBaseUrl?: string;
  /** Extra environment (KEEL_RESTART_DRAIN_TIMEOUT, KEEL_GATEWAY_BUSY_INPUT_MODE, ...). */
  env?: Record<string, string>;
  /** Default null. Restart tests use "container" (exit 75) so that no detached successor is spawned. */
  supervisor?: Supervisor;
  now?: () => number;
}

export interface InProcessGateway {
  gateway: Gateway;
  /** The `test` platform: what each chat "saw". */
  platform: CountingAdapter;
  /** Base URL of the gateway's HTTP server. */
  url: string;
  controlToken: string;
  /** Sends a chat message from the test platform; the session key is `agent:main:test:dm:<chatId>`. */
  send(text: string, chatId?: string): Promise<{ sessionId: string; inboxId: number }>;
  /** Stops it (planned stop) unless it already stopped; resolves with the exit code. */
  shutdown(): Promise<number>;
}

let messageCounter = 0;

/** Session key of a test-platform chat. */
export function testSessionKey(chatId = "1"): string {
  return `agent:main:test:dm:${chatId}`;
}

/**
 * A real Gateway in this process (the composition root, with the real store, runner, HTTP
 * server and agent) on port 0, with a `test` platform added, started and ready.
 */
export async function startInProcessGateway(
  options: InProcessGatewayOptions,
): Promise<InProcessGateway> {
  const env: Record<string, string> = {
    KEEL_HTTP_PORT: "0",
    KEEL_WEBCHAT_ENABLED: "false",
    ...(options.modelBaseUrl && {
      OPENAI_BASE_URL: options.modelBaseUrl,
      KEEL_MODEL: "fake-model",
      OPENAI_API_KEY: "test",
    }),
    ...options.env,
  };
  const { config } = loadConfig({ home: options.home, env });
  const platform = new CountingAdapter("test");
  const gateway = createTestGateway(config, {
    extraAdapters: [platform],
    ...(options.supervisor && { supervisor: options.supervisor }),
    ...(options.now && { now: options.now }),
  });
  await gateway.start();
  let exitCode: number | null = null;
  void gateway.exited.then((code) => (exitCode = code));
  return {
    gateway,
    platform,
    url: `http://127.0.0.1:${gateway.port}`,
    controlToken: config.controlToken,
    async send(text, chatId = "1") {
      messageCounter += 1;
      const message: InboundMessage = {
        platform: "test",
        chatId,
        platformMessageId: `m${messageCounter}`,
        sessionKey: testSessionKey(chatId),
        text,
        address: { platform: "test", chatId },
      };
      const result = await gateway.runner.receive(message);
      return { sessionId: result.sessionId, inboxId: result.inboxId };
    },
    async shutdown() {
      if (exitCode !== null) return exitCode;
      gateway.requestStop({ restart: false, signalInitiated: false });
      return gateway.exited;
    },
  };
}
