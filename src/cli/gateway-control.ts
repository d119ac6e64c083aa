/**
 * `keel gateway start|stop|restart`: drive the gateway of a home folder through the installed
 * service manager when a unit/agent for that home exists, as a background process otherwise,
 * and return only once the new state is reached (ready, or gone) or the timeout passed.
 *
 * Exit codes: 0 the state was reached (also "already running" for start and "not running" for
 * stop, as `systemctl start|stop` do); 1 it was not reached in time or the process died; 2 a bad
 * option; 78 a configuration error, for `start` and `restart` only (they start a gateway, which
 * would refuse the config): `stop` works from the home's own files then (see loadForControl).
 */
import type { Config } from "../config/schema.js";
import { writePlannedStop } from "../lifecycle/markers.js";
import { isGatewayAlive, type PidRecord } from "../lifecycle/pid-file.js";
import { readRuntimeStatus } from "../lifecycle/runtime-status.js";
import { minimumStopTimeout } from "../service/service-spec.js";
import {
  describeExit,
  outputLogPath,
  type ReadyOutcome,
  spawnBackgroundGateway,
  waitUntilReady,
} from "./background-gateway.js";
import {
  callControlApi,
  fetchOwnApiStatus,
  fileSize,
  gatewayBaseUrl,
  liveGateway,
  loginLink,
  parseTimeoutSeconds,
  pollUntil,
  portInUse,
  readLogTail,
} from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand, loadForControl } from "./load.js";
import {
  findServiceTarget,
  launchctlKickstart,
  machineServiceDeps,
  type ServiceTarget,
  systemctlCommand,
  systemdUnitActive,
} from "./service-target.js";

/** How long `start` waits for `/readyz` by default. */
export const DEFAULT_START_TIMEOUT_SECONDS = 60;
const LOG_TAIL_LINES = 15;

export interface ControlOptions extends GlobalOptions {
  /** `--timeout <seconds>`. */
  timeout?: string;
  /** `stop --force`: SIGKILL when the timeout passes. */
  force?: boolean;
}

type Deps = ReturnType<typeof machineServiceDeps>;

/** Default wait of `stop`: drain + 30 s (the gateway itself gives up at drain + ~12 s). */
export function defaultStopTimeoutSeconds(drainSeconds: number): number {
  return minimumStopTimeout(drainSeconds);
}

/** Default wait of `restart`: the old process's stop, then a start. */
export function defaultRestartTimeoutSeconds(drainSeconds: number): number {
  return minimumStopTimeout(drainSeconds) + DEFAULT_START_TIMEOUT_SECONDS;
}

function loadWithTimeout(
  options: ControlOptions,
  io: CliIo,
  fallback: (config: Config) => number,
): { config: Config; timeoutMs: number } | number {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  return withTimeout(loaded.loaded.config, options, io, fallback);
}

function withTimeout(
  config: Config,
  options: ControlOptions,
  io: CliIo,
  fallback: (config: Config) => number,
): { config: Config; timeoutMs: number } | number {
  const seconds = parseTimeoutSeconds(options.timeout, fallback(config));
  if (seconds === null) {
    io.err(`keel: --timeout must be a positive number of seconds, got '${options.timeout}'`);
    return EXIT.usage;
  }
  return { config, timeoutMs: seconds * 1000 };
}

export async function gatewayStart(options: ControlOptions, io: CliIo): Promise<number> {
  const loaded = loadWithTimeout(options, io, () => DEFAULT_START_TIMEOUT_SECONDS);
  if (typeof loaded === "number") return loaded;
  return startGateway(loaded.config, io, loaded.timeoutMs, machineServiceDeps());
}

async function startGateway(
  config: Config,
  io: CliIo,
  timeoutMs: number,
  deps: Deps,
): Promise<number> {
  const url = gatewayBaseUrl(config.http);
  const running = await liveGateway(config.home);
  if (running !== null) {
    io.out(`Gateway already running (pid ${running.pid}) at ${url}.`);
    printLoginLink(io, config);
    return EXIT.ok;
  }
  // A port another program holds (another home's gateway, say) fails the start for certain:
  // say so now instead of starting a gateway only to watch it die.
  const busy = config.http.port === 0 ? null : await portInUse(config.http.host, config.http.port);
  if (busy !== null) {
    io.err(
      `keel: ${config.http.host}:${config.http.port} is taken by another program (${busy}); nothing was started. Stop that program, or set http.port (KEEL_HTTP_PORT).`,
    );
    return EXIT.failure;
  }
  const logFile = outputLogPath(config.home);
  const logOffset = fileSize(logFile);
  const target = await findServiceTarget(config.home, deps);
  let spawned: ReturnType<typeof spawnBackgroundGateway> | null = null;
  if (target !== null) {
    const argv =
      target.kind === "systemd" ? systemctlCommand(target, "start") : launchctlKickstart(deps.uid);
    const result = await deps.run(argv);
    if (result.code !== 0) {
      io.err(`keel: \`${argv.join(" ")}\` failed (exit ${result.code}): ${result.stderr.trim()}`);
      return EXIT.failure;
    }
  } else {
    spawned = spawnBackgroundGateway({ home: config.home, env: io.env, logFile });
  }
  const childPid = spawned?.pid ?? null;
  const outcome = await waitUntilReady(config, {
    accept: (record) => childPid === null || record.pid === childPid,
    ...(spawned !== null && { exited: spawned.exited }),
    timeoutMs,
  });
  if (outcome.kind === "ready" || outcome.kind === "drained") {
    io.out(`Gateway started (pid ${outcome.pid}) at ${url}.${drainedNote(outcome)}`);
    printLoginLink(io, config);
    return EXIT.ok;
  }
  if (outcome.kind === "exited") {
    io.err(`keel: the gateway ${describeExit(outcome.exit)} while starting.`);
  } else {
    const which = outcome.pid === null ? "" : ` (pid ${outcome.pid})`;
    io.err(
      `keel: the gateway${which} is not ready after ${timeoutMs / 1000}s; it is left running. Stop it with \`keel gateway stop\`.`,
    );
  }
  printLogTail(io, config.home, logOffset, target);
  return EXIT.failure;
}

/**
 * The login link, to the terminal that started the gateway (the gateway's own output goes to a
 * log file, which must not hold the token); a redirect into a file gets the hint instead.
 */
function printLoginLink(io: CliIo, config: Config): void {
  io.out(
    io.stdoutIsFile === true
      ? "Login: run `keel open` for the browser login link."
      : `Login: ${loginLink(config.http, config.controlToken)}`,
  );
}

function drainedNote(outcome: ReadyOutcome): string {
  return outcome.kind === "drained"
    ? " It is drained: new turns are refused until `keel gateway drain --cancel`."
    : "";
}

function printLogTail(io: CliIo, home: string, offset: number, target: ServiceTarget | null): void {
  const logFile = outputLogPath(home);
  const tail = readLogTail(logFile, offset, LOG_TAIL_LINES);
  if (tail.length > 0) {
    io.err(`Last lines of ${logFile}:`);
    for (const line of tail) io.err(`  ${line}`);
  } else {
    io.err(`See ${home}/logs/gateway.log.`);
  }
  if (target?.kind === "systemd") {
    io.err(
      `Service output: journalctl ${target.system ? "" : "--user "}-u keel-gateway -n 50 --no-pager`,
    );
  }
}

export async function gatewayStop(options: ControlOptions, io: CliIo): Promise<number> {
  const loaded = withTimeout((await loadForControl(options, io)).config, options, io, (c) =>
    defaultStopTimeoutSeconds(c.agent.restart_drain_timeout),
  );
  if (typeof loaded === "number") return loaded;
  const { config, timeoutMs } = loaded;
  const live = await liveGateway(config.home);
  if (live === null) {
    io.out("Gateway is not running.");
    return EXIT.ok;
  }
  // Before any signal: the gateway must see this stop as planned (exit 0, `stopped`).
  await writePlannedStop(config.home, {
    pid: live.pid,
    startTime: live.start_time,
    now: Date.now(),
  });
  const deps = machineServiceDeps();
  if (!(await stopThroughSystemd(config.home, deps))) sendSignal(live.pid, "SIGTERM");
  io.out(`Stopping the gateway (pid ${live.pid})...`);
  if (await waitUntilGone(live, timeoutMs)) return reportStopped(config.home, live, io);
  if (options.force) {
    sendSignal(live.pid, "SIGKILL");
    if (await waitUntilGone(live, 5000)) {
      io.err(
        `warning: the gateway (pid ${live.pid}) did not stop within ${timeoutMs / 1000}s and was killed (SIGKILL); interrupted sessions resume at the next start.`,
      );
      return EXIT.ok;
    }
  }
  io.err(
    `keel: the gateway (pid ${live.pid}) is still stopping after ${timeoutMs / 1000}s${options.force ? " and survived SIGKILL" : "; it was not killed"}. Running turns may still be draining: wait, check ${config.home}/logs/gateway.log, or run \`keel gateway stop --force\`.`,
  );
  return EXIT.failure;
}

/** Under an active systemd unit the manager must do the stop, or it would restart the unit. */
async function stopThroughSystemd(home: string, deps: Deps): Promise<boolean> {
  const target = await findServiceTarget(home, deps);
  if (target?.kind !== "systemd" || !(await systemdUnitActive(target, deps))) return false;
  const result = await deps.run(systemctlCommand(target, "stop"));
  return result.code === 0;
}

function sendSignal(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    // Already gone (ESRCH): the wait that follows sees it.
    return false;
  }
}

async function waitUntilGone(live: PidRecord, timeoutMs: number): Promise<boolean> {
  const gone = await pollUntil(async () => ((await isGatewayAlive(live)) ? null : true), {
    timeoutMs,
    intervalMs: 100,
  });
  return gone === true;
}

async function reportStopped(home: string, live: PidRecord, io: CliIo): Promise<number> {
  io.out(`Gateway stopped (pid ${live.pid}).`);
  const status = await readRuntimeStatus(home);
  if (status !== null && status.pid === live.pid && status.gateway_state !== "stopped") {
    io.err(
      `warning: it recorded gateway_state '${status.gateway_state}' instead of 'stopped' (the planned-stop marker was not honoured).`,
    );
  }
  return EXIT.ok;
}

export async function gatewayRestart(options: ControlOptions, io: CliIo): Promise<number> {
  const control = await loadForControl(options, io);
  if (control.broken) {
    // The new gateway would refuse this config: the running one is left alone.
    const live = await liveGateway(control.config.home);
    io.err(
      live === null
        ? "keel: nothing was started: fix the config first (`keel doctor` shows it again)."
        : `keel: not restarted: the new gateway would refuse this config. The running one (pid ${live.pid}) is left as it is; fix the config first (\`keel doctor\` shows it again).`,
    );
    return EXIT.config;
  }
  const loaded = withTimeout(control.config, options, io, (c) =>
    defaultRestartTimeoutSeconds(c.agent.restart_drain_timeout),
  );
  if (typeof loaded === "number") return loaded;
  const { config, timeoutMs } = loaded;
  const deps = machineServiceDeps();
  const live = await liveGateway(config.home);
  if (live === null) {
    io.out("Gateway is not running; starting it.");
    return startGateway(config, io, timeoutMs, deps);
  }
  const logOffset = fileSize(outputLogPath(config.home));
  if (!(await requestRestart(config, live, io, deps))) return EXIT.failure;
  io.out(`Restarting the gateway (pid ${live.pid})...`);
  const outcome = await waitUntilReady(config, {
    accept: (record) => record.pid !== live.pid,
    timeoutMs,
  });
  if (outcome.kind === "ready" || outcome.kind === "drained") {
    io.out(
      `Gateway restarted (pid ${live.pid} -> ${outcome.pid}) at ${gatewayBaseUrl(config.http)}.${drainedNote(outcome)}`,
    );
    return EXIT.ok;
  }
  const oldAlive = await isGatewayAlive(live);
  io.err(
    oldAlive
      ? `keel: the old gateway (pid ${live.pid}) is still stopping after ${timeoutMs / 1000}s; running turns may still be draining.`
      : `keel: the old gateway (pid ${live.pid}) exited but no new one was ready within ${timeoutMs / 1000}s. A gateway run in the foreground under a container or launchd exits 75 and needs that supervisor to start it again; otherwise run \`keel gateway start\`.`,
  );
  printLogTail(io, config.home, logOffset, await findServiceTarget(config.home, deps));
  return EXIT.failure;
}

/**
 * Asks for a planned restart: `systemctl reload` (SIGUSR1 through `ExecReload`) when the running
 * gateway is the active systemd unit's, else the control API of this home's gateway, else SIGUSR1
 * directly.
 */
async function requestRestart(
  config: Config,
  live: PidRecord,
  io: CliIo,
  deps: Deps,
): Promise<boolean> {
  const target = await findServiceTarget(config.home, deps);
  if (target?.kind === "systemd" && (await systemdUnitActive(target, deps))) {
    if ((await deps.run(systemctlCommand(target, "reload"))).code === 0) return true;
  }
  // The control API only when the gateway answering at the address is this one (its pid);
  // otherwise the signal, which reaches exactly the process the pid file names.
  if ((await fetchOwnApiStatus(config, live)) !== null) {
    const answer = await callControlApi(config, "/api/gateway/restart", { method: "POST" });
    if (answer !== null && answer.status >= 200 && answer.status < 300) {
      const body = answer.body as { accepted?: unknown; message?: unknown };
      if (body.accepted === false && typeof body.message === "string") io.err(body.message);
      return true;
    }
  }
  if (sendSignal(live.pid, "SIGUSR1")) return true;
  io.err(`keel: could not ask the gateway (pid ${live.pid}) to restart.`);
  return false;
}
