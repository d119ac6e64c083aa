/** `keel gateway run`: the gateway in the foreground until a signal or a stop request ends it. */
import { join } from "node:path";
import { createAgentParts } from "../gateway/agent-wiring.js";
import { Gateway } from "../gateway/gateway.js";
import { createCrashPoint } from "../lib/crash-point.js";
import { errorMessage } from "../lib/errors.js";
import { createLogger } from "../lib/logger.js";
import { KEEL_VERSION } from "../version.js";
import { EXIT, type CliIo } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

export async function gatewayRun(options: GlobalOptions, io: CliIo): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config, warnings } = loaded.loaded;
  const logger = createLogger({ level: config.logging.level, file: join(config.home, "logs", "gateway.log"), stderr: true });
  for (const warning of warnings) logger.warn(warning);
  const agent = createAgentParts(config, logger.child({ component: "agent" }));
  const gateway = new Gateway({ config, logger, agent, crashPoint: createCrashPoint(config.crashPoint), version: KEEL_VERSION });
  try {
    await gateway.start();
  } catch (err) {
    logger.fatal({ err }, "gateway failed to start");
    io.err(`keel: the gateway could not start: ${errorMessage(err)}`);
    await gateway.stopGateway().catch(() => {});
    return EXIT.failure;
  }
  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (code: number) => {
      if (stopping) return;
      stopping = true;
      gateway
        .stopGateway()
        .catch((err: unknown) => logger.error({ err }, "stop failed"))
        .finally(() => resolve(code));
    };
    io.onSignal("SIGTERM", () => stop(EXIT.failure));
    io.onSignal("SIGINT", () => stop(EXIT.ok));
  });
}
