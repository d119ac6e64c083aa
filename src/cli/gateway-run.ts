/**
 * `keel gateway run`: the gateway in the foreground until a stop or restart ends it. Maps
 * signals to stops (SIGTERM: planned when `.planned_stop.json` names this process, unexpected
 * otherwise; SIGINT: planned; SIGUSR1: restart) and enforces the one stop budget.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { createAgentParts } from "../gateway/agent-wiring.js";
import { detectSupervisor } from "../gateway/exit-code.js";
import { AlreadyRunningError, Gateway } from "../gateway/gateway.js";
import { consumePlannedStopForSelf } from "../gateway/markers.js";
import { createCrashPoint } from "../lib/crash-point.js";
import { errorMessage } from "../lib/errors.js";
import { createLogger } from "../lib/logger.js";
import { checkInstalledServiceTimeout } from "../service/install.js";
import { KEEL_VERSION } from "../version.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

/** Beyond the drain timeout, the most a stop may take before the process exits anyway. */
const STOP_MARGIN_MS = 10_000;

export interface GatewayRunOptions extends GlobalOptions {
  /** `--no-supervisor` sets false: started in the background by `keel gateway start`. */
  supervisor?: boolean;
}

export async function gatewayRun(options: GatewayRunOptions, io: CliIo): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config, warnings } = loaded.loaded;
  const logger = createLogger({
    level: config.logging.level,
    file: join(config.home, "logs", "gateway.log"),
    stderr: true,
  });
  for (const warning of warnings) logger.warn(warning);
  const gateway = createGateway(config, logger, io, options.supervisor !== false);
  const overBudget = watchStopBudget(gateway, config, logger);
  // Signals are handled from the first moment: one arriving while the gateway starts is kept
  // and acted on once start-up has finished (SIGUSR1 would otherwise open Node's inspector).
  const self = { pid: process.pid, startTime: null };
  io.onSignal("SIGTERM", () => {
    void consumePlannedStopForSelf(config.home, self, Date.now()).then((planned) =>
      gateway.requestStop({ restart: false, signalInitiated: !planned }),
    );
  });
  io.onSignal("SIGINT", () => gateway.requestStop({ restart: false, signalInitiated: false }));
  io.onSignal("SIGUSR1", () => gateway.requestStop({ restart: true, signalInitiated: false }));
  try {
    await gateway.start();
  } catch (err) {
    if (err instanceof AlreadyRunningError) {
      io.err(`keel: ${err.message}`);
    } else {
      logger.fatal({ err }, "gateway failed to start");
      io.err(`keel: the gateway could not start: ${errorMessage(err)}`);
    }
    return EXIT.failure;
  }
  void warnAboutServiceTimeout(config, logger);
  printWelcome(io, config, gateway.port);
  const code = await Promise.race([gateway.exited, overBudget]);
  logger.flush();
  return code;
}

/**
 * The one stop budget: once a stop or restart begins (however it was asked for), the process
 * ends within restart_drain_timeout + STOP_MARGIN_MS even if something hangs.
 */
function watchStopBudget(gateway: Gateway, config: Config, logger: Logger): Promise<number> {
  const budgetMs = config.agent.restart_drain_timeout * 1000 + STOP_MARGIN_MS;
  return new Promise<number>((resolve) => {
    gateway.onStopRequested((request) => {
      setTimeout(() => {
        logger.error({ budgetMs }, "stop exceeded its budget; exiting anyway");
        // A restart leaves it to the supervisor (75); without one the gateway stays down.
        if (request.restart) resolve(EXIT.restart);
        else resolve(request.signalInitiated ? EXIT.failure : EXIT.ok);
      }, budgetMs).unref();
    });
  });
}

function printWelcome(io: CliIo, config: Config, port: number): void {
  const url = `http://${config.http.host}:${port}`;
  io.out(`Keel ${KEEL_VERSION} is running (pid ${process.pid}).`);
  io.out(`  web chat:  ${url}/`);
  io.out(`  dashboard: ${url}/dashboard  (control token: ${join(config.home, "control_token")})`);
  io.out(`  API:       ${url}/v1  (OpenAI-compatible)`);
  if (!config.model.base_url || !config.model.name) {
    io.out(
      "  model:     not configured — set OPENAI_BASE_URL and KEEL_MODEL (or model.* in config.yaml)",
    );
  }
  io.out(`  logs:      ${join(config.home, "logs", "gateway.log")}`);
}

function createGateway(config: Config, logger: Logger, io: CliIo, supervised: boolean): Gateway {
  const entry = fileURLToPath(new URL("../../bin/keel.js", import.meta.url));
  return new Gateway({
    config,
    logger,
    agent: createAgentParts(config, logger.child({ component: "agent" })),
    crashPoint: createCrashPoint(config.crashPoint),
    version: KEEL_VERSION,
    // Unsupervised (background start): restarts always use the detached successor, which keeps the flag.
    supervisor: supervised ? detectSupervisor(io.env, existsSync) : null,
    relaunch: () => ({
      nodePath: process.execPath,
      entry,
      args: ["gateway", "run", "--home", config.home, ...(supervised ? [] : ["--no-supervisor"])],
      logFile: join(config.home, "logs", "gateway.out.log"),
    }),
  });
}

async function warnAboutServiceTimeout(config: Config, logger: Logger): Promise<void> {
  try {
    const { homedir } = await import("node:os");
    const warning = await checkInstalledServiceTimeout(
      { drainTimeoutSeconds: config.agent.restart_drain_timeout },
      { platform: process.platform, homeDir: homedir() },
    );
    if (warning) logger.warn(warning);
  } catch (err) {
    logger.debug({ err }, "could not check the installed service unit");
  }
}
