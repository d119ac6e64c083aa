/** What a service manager needs to run the gateway, and the one rule tying its stop timer to the drain. */
import { KEEL_PREFIXES } from "../config/tool-env.js";

/** Everything the unit/plist renderers need; built by the CLI at install time. */
export interface ServiceSpec {
  /** Absolute path of the node binary that runs Keel (usually `process.execPath`). */
  nodePath: string;
  /** Absolute path of `bin/keel.js`. */
  keelEntry: string;
  /** Absolute Keel home folder; passed as `--home` and `KEEL_HOME`. */
  home: string;
  /** Environment captured at install time (see {@link captureServiceEnv}); `KEEL_HOME` is forced to `home`. */
  env: Record<string, string>;
  /** `agent.restart_drain_timeout` in seconds; the supervisor's kill timer is derived from it. */
  drainTimeoutSeconds: number;
  /** A system-wide unit (`/etc/systemd/system`) instead of a per-user one. */
  system: boolean;
  /** The account a system unit runs as (`User=`); ignored for user units. */
  user?: string;
}

/** Seconds the supervisor allows beyond the drain for interrupting turns, killing tools and persisting. */
export const STOP_MARGIN_SECONDS = 30;

/** The supervisor's kill timer never drops below this, so a drain of 0 still gets a roomy cleanup. */
export const MIN_STOP_TIMEOUT_SECONDS = 60;

/**
 * The one rule deriving supervisor stop timers (systemd `TimeoutStopSec`, launchd `ExitTimeOut`,
 * compose `stop_grace_period`) from the drain timeout: `max(ceil(drain) + 30, 60)` whole seconds.
 * The gateway's own stop deadline (drain + a small margin) then always ends before the supervisor's
 * SIGKILL: a kill timer shorter than the drain kills a draining gateway, whose restart finds the
 * same work and is killed again (docs/operations.md, "The stop budget").
 * A negative or non-finite drain counts as 0. Pure.
 */
export function stopTimeoutFromDrain(drainSeconds: number): number {
  const drain = Number.isFinite(drainSeconds) && drainSeconds > 0 ? Math.ceil(drainSeconds) : 0;
  return Math.max(drain + STOP_MARGIN_SECONDS, MIN_STOP_TIMEOUT_SECONDS);
}

/** The smallest stop timer an installed unit may have before the gateway warns: drain + 30 s. */
export function minimumStopTimeout(drainSeconds: number): number {
  const drain = Number.isFinite(drainSeconds) && drainSeconds > 0 ? Math.ceil(drainSeconds) : 0;
  return drain + STOP_MARGIN_SECONDS;
}

const CAPTURED_NAMES = [
  "PATH",
  "LANG",
  "LC_ALL",
  "TZ",
  "NODE_OPTIONS",
  "NODE_EXTRA_CA_CERTS",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
];
const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD/i;

/** Result of {@link captureServiceEnv}. */
export interface CapturedEnv {
  env: Record<string, string>;
  /** Names deliberately not copied (secrets headed for a system unit). */
  skipped: string[];
}

/**
 * Picks the variables a service should inherit from the installing shell: PATH, locale, proxies,
 * Node options and every `KEEL_*`, `OPENAI_*`, `TELEGRAM_*`, `SLACK_*` setting; `KEEL_HOME` is set to `home`.
 * For a system unit, secret-looking names (KEY/TOKEN/SECRET/PASSWORD) are skipped, because any
 * local user can read a system unit's environment with `systemctl show`; they belong in
 * `config.yaml` instead. Empty values are dropped. Pure.
 */
export function captureServiceEnv(
  env: Readonly<Record<string, string | undefined>>,
  options: { home: string; system: boolean },
): CapturedEnv {
  const captured: Record<string, string> = {};
  const skipped: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || value === "" || name === "KEEL_HOME") continue;
    const wanted = CAPTURED_NAMES.includes(name) || KEEL_PREFIXES.some((p) => name.startsWith(p));
    if (!wanted) continue;
    if (options.system && SECRET_NAME.test(name)) {
      skipped.push(name);
      continue;
    }
    captured[name] = value;
  }
  captured.KEEL_HOME = options.home;
  return { env: captured, skipped: skipped.sort() };
}

/** The environment a renderer writes: the captured one, `KEEL_HOME` forced, keys sorted. Pure. */
export function serviceEnvironment(spec: ServiceSpec): Array<[string, string]> {
  const merged: Record<string, string> = { ...spec.env, KEEL_HOME: spec.home };
  for (const name of Object.keys(merged)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new Error(
        `Environment variable name ${JSON.stringify(name)} is not valid in a service file`,
      );
    }
  }
  return Object.entries(merged).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Throws unless every path the service runs with is absolute (a supervisor has no useful cwd). */
export function assertAbsolutePaths(spec: ServiceSpec): void {
  for (const [field, value] of [
    ["nodePath", spec.nodePath],
    ["keelEntry", spec.keelEntry],
    ["home", spec.home],
  ] as const) {
    if (!value.startsWith("/")) {
      throw new Error(
        `ServiceSpec.${field} must be an absolute path, got ${JSON.stringify(value)}`,
      );
    }
  }
}

/** What a service file says about the gateway, for the renderers. */
export interface ServiceFileParts {
  argv: string[];
  /** Sorted by name, `KEEL_HOME` forced. */
  environment: Array<[string, string]>;
  /** The supervisor's kill timer, {@link stopTimeoutFromDrain}. */
  stopTimeoutSeconds: number;
}

/** The parts of a service file; throws on relative paths or invalid environment names. Pure. */
export function serviceFileParts(spec: ServiceSpec): ServiceFileParts {
  assertAbsolutePaths(spec);
  return {
    argv: gatewayArgv(spec),
    environment: serviceEnvironment(spec),
    stopTimeoutSeconds: stopTimeoutFromDrain(spec.drainTimeoutSeconds),
  };
}

/** The argv the supervisor runs: `<node> <keel.js> gateway run --home <home>`. Pure. */
export function gatewayArgv(spec: ServiceSpec): string[] {
  return [spec.nodePath, spec.keelEntry, "gateway", "run", "--home", spec.home];
}
