/**
 * `keel gateway run`: the gateway in the foreground until a stop or restart ends it. Maps
 * signals to stops (SIGTERM: planned when `.planned_stop.json` names this process, unexpected
 * otherwise; SIGINT: planned; SIGUSR1: restart) and enforces the one stop budget.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import type { Env } from "../config/load-config.js";
import type { Config } from "../config/schema.js";
import { createGateway } from "../gateway/create-gateway.js";
import { AlreadyRunningError, type Gateway } from "../gateway/gateway.js";
import { errorMessage } from "../lib/errors.js";
import { createLogger } from "../lib/logger.js";
import { withMallocTunables } from "../lib/malloc-tunables.js";
import { KEEL_VERSION } from "../lib/version.js";
import { detectSupervisor } from "../lifecycle/exit-code.js";
import { consumePlannedStopForSelf } from "../lifecycle/markers.js";
import { gatewayBaseUrl, loginLink } from "./gateway-probe.js";
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
    pretty: io.stderrIsTTY === true,
  });
  for (const warning of warnings) logger.warn(warning);
  const supervised = options.supervisor !== false;
  // Unsupervised (background start): restarts always use the detached successor, which keeps the flag.
  const supervisor = supervised ? detectSupervisor(io.env, existsSync) : null;
  const gateway = createGateway(config, {
    logger,
    supervisor,
    relaunch: successor(config, supervised, io.env),
  });
  const overBudget = watchStopBudget(gateway, config, logger);
  // Signals are handled from the first moment: one arriving while the gateway starts is kept
  // and acted on once start-up has finished (SIGUSR1 would otherwise open Node's inspector).
  const self = { pid: process.pid, startTime: null };
  const { lifecycle } = gateway;
  io.onSignal("SIGTERM", () => {
    void consumePlannedStopForSelf(config.home, self, Date.now()).then((planned) =>
      lifecycle.requestStop({ restart: false, signalInitiated: !planned }),
    );
  });
  io.onSignal("SIGINT", () => lifecycle.requestStop({ restart: false, signalInitiated: false }));
  io.onSignal("SIGUSR1", () => lifecycle.requestStop({ restart: true, signalInitiated: false }));
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
  const http = { host: config.http.host, port: gateway.port };
  // The link carries the control token: the log (journald, docker logs) gets only where to find it.
  logger.info({ url: `${gatewayBaseUrl(http)}/` }, "web login: open the link `keel open` prints");
  // The link carries the token: not into a journal nor a file (a background start's output log).
  const linkHidden = (supervised && supervisedByService(io)) || io.stdoutIsFile === true;
  printWelcome(io, config, gateway.port, linkHidden);
  const code = await Promise.race([lifecycle.exited, overBudget]);
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
    gateway.lifecycle.onStopRequested((request) => {
      setTimeout(() => {
        logger.error({ budgetMs }, "stop exceeded its budget; exiting anyway");
        // A restart leaves it to the supervisor (75); without one the gateway stays down.
        if (request.restart) resolve(EXIT.restart);
        else resolve(request.signalInitiated ? EXIT.failure : EXIT.ok);
      }, budgetMs).unref();
    });
  });
}

/**
 * The human start lines. The login link (with the token) goes to the terminal of a gateway run
 * by hand; under a service manager stdout ends in the system journal, and a background start's
 * in `logs/gateway.out.log` (`keel gateway start` prints the link itself), so only the hint does.
 */
function printWelcome(io: CliIo, config: Config, port: number, linkHidden: boolean): void {
  const http = { host: config.http.host, port };
  const url = gatewayBaseUrl(http);
  io.out(`Keel ${KEEL_VERSION} is running (pid ${process.pid}).`);
  io.out(
    linkHidden
      ? "  login:     run `keel open` for the browser login link"
      : `  login:     ${loginLink(http, config.controlToken)}  (or \`keel open\`)`,
  );
  io.out(`  web chat:  ${url}/`);
  io.out(`  dashboard: ${url}/dashboard  (control token: ${join(config.home, "control_token")})`);
  io.out(
    `  API:       ${url}/v1  (OpenAI-compatible; Bearer: the control token or platforms.api.key)`,
  );
  if (config.http.trust_loopback) {
    io.out("  warning:   http.trust_loopback is on: local processes need no credential");
  }
  if (!config.model.base_url || !config.model.name) {
    io.out(
      "  model:     not configured — next step: run `keel setup` (or set OPENAI_BASE_URL and KEEL_MODEL)",
    );
  }
  io.out(`  logs:      ${join(config.home, "logs", "gateway.log")}`);
}

/**
 * systemd or launchd runs this process: its stdout lands in a system journal that more people may
 * read than the control token. (A container's output is for those who control the container.)
 */
function supervisedByService(io: CliIo): boolean {
  const supervisor = detectSupervisor(io.env, existsSync);
  return supervisor === "systemd" || supervisor === "launchd";
}

/** The successor of a restart outside a supervisor: this same command on the same home. */
function successor(config: Config, supervised: boolean, env: Env) {
  const entry = fileURLToPath(new URL("../../bin/keel.js", import.meta.url));
  return () => ({
    nodePath: process.execPath,
    entry,
    args: ["gateway", "run", "--home", config.home, ...(supervised ? [] : ["--no-supervisor"])],
    logFile: join(config.home, "logs", "gateway.out.log"),
    env: withMallocTunables(env),
  });
}

async function warnAboutServiceTimeout(config: Config, logger: Logger): Promise<void> {
  try {
    const { homedir } = await import("node:os");
    // Loaded here, after the start: the service installer is otherwise a CLI command's.
    const { checkInstalledServiceTimeout } = await import("../service/install.js");
    const warning = await checkInstalledServiceTimeout(
      { drainTimeoutSeconds: config.agent.restart_drain_timeout },
      { platform: process.platform, homeDir: homedir() },
    );
    if (warning) logger.warn(warning);
  } catch (err) {
    logger.debug({ err }, "could not check the installed service unit");
  }
}
