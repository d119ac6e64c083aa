/** Installs, removes and inspects the gateway's systemd unit or launchd agent through an injected runner. */
import { execFile } from "node:child_process";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { LAUNCHD_LABEL, renderLaunchdPlist } from "./launchd.js";
import { minimumStopTimeout, type ServiceSpec, STOP_MARGIN_SECONDS } from "./service-spec.js";
import { renderSystemdUnit, SYSTEMD_UNIT_NAME } from "./systemd.js";

/** Outcome of one external command; `code` 127 when it could not be started. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one command without a shell. Must never throw; failures are a non-zero `code`. */
export type RunCommand = (argv: readonly string[]) => Promise<RunResult>;

/** What the installer needs from the machine; tests pass a recorder and a temp folder. */
export interface ServiceDeps {
  run: RunCommand;
  /** `process.platform`: `linux` uses systemd, `darwin` launchd. */
  platform: NodeJS.Platform;
  /** The OS account's home folder (`os.homedir()`), not `KEEL_HOME`. */
  homeDir: string;
  /** The account's uid, for launchd's `gui/<uid>` domain. */
  uid: number;
  /** Folder the unit file goes to instead of the standard one (tests). */
  unitDir?: string;
}

/** The kind of service file this platform gets. */
export type ServiceKind = "systemd" | "launchd";

/** Result of {@link installService}. */
export interface InstallResult {
  /** `differs`: an installed file has other content and `force` was not given; nothing changed. */
  outcome: "dry-run" | "installed" | "replaced" | "unchanged" | "differs" | "failed";
  kind: ServiceKind;
  path: string;
  /** The rendered unit or plist. */
  text: string;
  /** Commands run (or, for a dry run, that would run). */
  commands: string[][];
  /** What went wrong, for `failed`. */
  error?: string;
}

/** Result of {@link uninstallService}. */
export interface UninstallResult {
  outcome: "dry-run" | "removed" | "not-installed" | "failed";
  kind: ServiceKind;
  path: string;
  commands: string[][];
  error?: string;
  /** `removed`, but a follow-up command (daemon-reload) failed. */
  warning?: string;
}

/** Result of {@link serviceStatus}. */
export interface ServiceStatus {
  kind: ServiceKind;
  path: string;
  installed: boolean;
  /** Whether the installed file equals what `install` would write now; null when not compared. */
  upToDate: boolean | null;
  /** systemd `is-active` / launchd job state, or null when not installed or not queryable. */
  state: string | null;
  /** systemd `is-enabled`, or `loaded`/`not loaded` for launchd. */
  enabled: string | null;
  /** Stale stop-timeout warning, see {@link checkInstalledUnitTimeout}. */
  warning: string | null;
}

/** Which service file a platform uses; throws for platforms Keel cannot install on. */
export function serviceKindFor(platform: NodeJS.Platform): ServiceKind {
  if (platform === "linux") return "systemd";
  if (platform === "darwin") return "launchd";
  throw new Error(
    `No service manager support on ${platform}; run \`keel gateway run\` under your own supervisor`,
  );
}

/**
 * Where the unit file lives: `~/.config/systemd/user/keel-gateway.service`,
 * `/etc/systemd/system/keel-gateway.service` (system) or `~/Library/LaunchAgents/ai.keel.gateway.plist`;
 * `deps.unitDir` replaces the folder. Pure.
 */
export function serviceUnitPath(deps: Omit<ServiceDeps, "run" | "uid">, system: boolean): string {
  const kind = serviceKindFor(deps.platform);
  if (kind === "launchd") {
    return join(
      deps.unitDir ?? join(deps.homeDir, "Library", "LaunchAgents"),
      `${LAUNCHD_LABEL}.plist`,
    );
  }
  const folder = system ? "/etc/systemd/system" : join(deps.homeDir, ".config", "systemd", "user");
  return join(deps.unitDir ?? folder, SYSTEMD_UNIT_NAME);
}

function systemctl(system: boolean, ...args: string[]): string[] {
  return system ? ["systemctl", ...args] : ["systemctl", "--user", ...args];
}

function launchdTarget(uid: number): string {
  return `gui/${uid}/${LAUNCHD_LABEL}`;
}

async function readIfExists(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

async function writeAtomically(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  // 0600: the unit may carry API keys captured from the installing shell.
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, path);
}

/**
 * Undoes a failed install: the previous file comes back (or the new one goes), and the manager
 * is told once more, best effort. Returns what was done, for the error message.
 */
async function rollBack(
  kind: ServiceKind,
  system: boolean,
  path: string,
  previous: string | null,
  deps: ServiceDeps,
): Promise<string> {
  try {
    if (previous === null) await rm(path, { force: true });
    else await writeAtomically(path, previous);
  } catch (err) {
    return `could not roll back ${path}: ${(err as Error).message}`;
  }
  if (kind === "systemd") await deps.run(systemctl(system, "daemon-reload"));
  return previous === null ? `removed ${path} again` : `restored the previous ${path}`;
}

/** Runs commands in order; stops at the first failure not listed in `tolerated`. */
async function runAll(
  run: RunCommand,
  commands: string[][],
  tolerated: ReadonlySet<string[]> = new Set(),
): Promise<string | null> {
  for (const argv of commands) {
    const result = await run(argv);
    if (result.code !== 0 && !tolerated.has(argv)) {
      return `\`${argv.join(" ")}\` failed (exit ${result.code}): ${(result.stderr || result.stdout).trim()}`;
    }
  }
  return null;
}

/** Renders the file for this platform. Throws for `--system` on macOS or an unsupported platform. */
export function renderServiceFile(kind: ServiceKind, spec: ServiceSpec): string {
  if (kind === "launchd") {
    if (spec.system) throw new Error("--system is only supported with systemd");
    return renderLaunchdPlist(spec);
  }
  return renderSystemdUnit(spec);
}

/**
 * Writes the unit/plist and registers it: systemd `daemon-reload` + `enable` (it does not start
 * it); launchd `bootstrap` (loads and, with RunAtLoad, starts it; `bootout` first when replacing).
 * An identical installed file is left alone; a differing one is only replaced with `force`.
 * `dryRun` renders and lists the commands without touching anything. Never throws for expected
 * failures (permissions, failing commands): they come back as `outcome: "failed"`.
 */
export async function installService(
  options: { spec: ServiceSpec; force?: boolean; dryRun?: boolean },
  deps: ServiceDeps,
): Promise<InstallResult> {
  const kind = serviceKindFor(deps.platform);
  const { spec } = options;
  const path = serviceUnitPath(deps, spec.system);
  const text = renderServiceFile(kind, spec);
  const bootout = ["launchctl", "bootout", launchdTarget(deps.uid)];
  const register =
    kind === "systemd"
      ? [
          systemctl(spec.system, "daemon-reload"),
          systemctl(spec.system, "enable", SYSTEMD_UNIT_NAME),
        ]
      : [bootout, ["launchctl", "bootstrap", `gui/${deps.uid}`, path]];
  const result = (outcome: InstallResult["outcome"], commands: string[][], error?: string) => ({
    outcome,
    kind,
    path,
    text,
    commands,
    ...(error !== undefined ? { error } : {}),
  });
  if (options.dryRun) return result("dry-run", register);
  try {
    const existing = await readIfExists(path);
    if (existing === text) return result("unchanged", []);
    if (existing !== null && !options.force) return result("differs", []);
    await writeAtomically(path, text);
    if (kind === "launchd") await mkdir(join(spec.home, "logs"), { recursive: true, mode: 0o700 });
    // bootout fails when the job was not loaded, which is fine.
    const error = await runAll(deps.run, register, new Set([bootout]));
    if (error !== null) {
      // All or nothing: a unit left behind would make `keel gateway start` go through a service
      // manager that cannot run it.
      const undo = await rollBack(kind, spec.system, path, existing, deps);
      return result("failed", register, `${error}; ${undo}`);
    }
    return result(existing === null ? "installed" : "replaced", register);
  } catch (err) {
    return result("failed", [], `could not write ${path}: ${(err as Error).message}`);
  }
}

/**
 * Stops and unregisters the service, then deletes its file: systemd `disable --now` +
 * `daemon-reload`; launchd `bootout`. Missing file: `not-installed`, nothing run. Never throws for
 * expected failures.
 */
export async function uninstallService(
  options: { system: boolean; dryRun?: boolean },
  deps: ServiceDeps,
): Promise<UninstallResult> {
  const kind = serviceKindFor(deps.platform);
  const path = serviceUnitPath(deps, options.system);
  const before =
    kind === "systemd"
      ? [systemctl(options.system, "disable", "--now", SYSTEMD_UNIT_NAME)]
      : [["launchctl", "bootout", launchdTarget(deps.uid)]];
  const after = kind === "systemd" ? [systemctl(options.system, "daemon-reload")] : [];
  const commands = [...before, ...after];
  const result = (outcome: UninstallResult["outcome"], ran: string[][], error?: string) => ({
    outcome,
    kind,
    path,
    commands: ran,
    ...(error !== undefined ? { error } : {}),
  });
  if (options.dryRun) return result("dry-run", commands);
  try {
    if ((await readIfExists(path)) === null) return result("not-installed", []);
    // A unit that is not loaded cannot be disabled or booted out; removing the file still counts.
    await runAll(deps.run, before, new Set(before));
    await rm(path, { force: true });
    // The unit is gone either way; a failing reload only leaves systemd's cache stale until the
    // next one, so it is a warning, not a failed uninstall.
    const warning = await runAll(deps.run, after);
    return { ...result("removed", commands), ...(warning !== null && { warning }) };
  } catch (err) {
    return result("failed", commands, `could not remove ${path}: ${(err as Error).message}`);
  }
}

/**
 * Reports whether the unit is installed, current (when `spec` is given), enabled and running, and
 * whether its stop timeout is stale. Read-only. Never throws for failing status commands.
 */
export async function serviceStatus(
  options: { system: boolean; drainTimeoutSeconds: number; spec?: ServiceSpec },
  deps: ServiceDeps,
): Promise<ServiceStatus> {
  const kind = serviceKindFor(deps.platform);
  const path = serviceUnitPath(deps, options.system);
  const text = await readIfExists(path);
  const base = { kind, path, installed: text !== null };
  if (text === null) return { ...base, upToDate: null, state: null, enabled: null, warning: null };
  const upToDate = options.spec ? renderServiceFile(kind, options.spec) === text : null;
  const warning = checkInstalledUnitTimeout({
    unitText: text,
    drainTimeoutSeconds: options.drainTimeoutSeconds,
  });
  if (kind === "systemd") {
    const active = await deps.run(systemctl(options.system, "is-active", SYSTEMD_UNIT_NAME));
    const enabled = await deps.run(systemctl(options.system, "is-enabled", SYSTEMD_UNIT_NAME));
    const word = (r: RunResult) => r.stdout.trim().split("\n")[0] || null;
    return { ...base, upToDate, state: word(active), enabled: word(enabled), warning };
  }
  const printed = await deps.run(["launchctl", "print", launchdTarget(deps.uid)]);
  const loaded = printed.code === 0;
  const state = loaded ? (/^\s*state = (\S+)/m.exec(printed.stdout)?.[1] ?? "loaded") : null;
  return { ...base, upToDate, state, enabled: loaded ? "loaded" : "not loaded", warning };
}

const TIMESPAN_UNITS: Record<string, number> = {
  us: 1e-6,
  usec: 1e-6,
  ms: 1e-3,
  msec: 1e-3,
  s: 1,
  sec: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hr: 3600,
  hour: 3600,
  hours: 3600,
  d: 86400,
  day: 86400,
  days: 86400,
  w: 604800,
  week: 604800,
  weeks: 604800,
};

/** Parses a systemd time span (`90`, `90s`, `1min 30s`, `infinity`) into seconds; null if invalid. */
export function parseSystemdTimespan(value: string): number | null {
  const text = value.trim();
  if (text === "infinity") return Number.POSITIVE_INFINITY;
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text);
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)\s*([a-z]+)\s*/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text.replace(/^\s+/, ""))
    return null;
  let total = 0;
  for (const [, amount, unit] of parts) {
    const factor = TIMESPAN_UNITS[unit ?? ""];
    if (factor === undefined) return null;
    total += Number(amount) * factor;
  }
  return total;
}

/** The stop timeout an installed unit/plist grants, with the setting's name; defaults when absent. */
function installedStopTimeout(
  unitText: string,
): { name: string; seconds: number; shown: string } | null {
  if (unitText.trimStart().startsWith("<?xml") || unitText.includes("<plist")) {
    const match = /<key>ExitTimeOut<\/key>\s*<integer>(\d+)<\/integer>/.exec(unitText);
    // launchd: absent means its default of 20 s; 0 means no limit.
    const seconds = match ? Number(match[1]) : 20;
    return {
      name: "ExitTimeOut",
      seconds: seconds === 0 ? Number.POSITIVE_INFINITY : seconds,
      shown: String(seconds),
    };
  }
  let shown: string | null = null;
  for (const line of unitText.split("\n")) {
    const match = /^\s*(TimeoutStopSec|TimeoutSec)\s*=(.*)$/.exec(line);
    if (match) shown = (match[2] ?? "").trim();
  }
  // Absent or reset to empty: systemd's DefaultTimeoutStopSec, normally 90 s.
  if (shown === null || shown === "")
    return { name: "TimeoutStopSec", seconds: 90, shown: "90 (default)" };
  const seconds = parseSystemdTimespan(shown);
  return seconds === null ? null : { name: "TimeoutStopSec", seconds, shown };
}

/**
 * Checks an installed systemd unit or launchd plist against the drain timeout the gateway runs
 * with. Returns a warning naming the fix when the supervisor would SIGKILL before drain + 30 s,
 * else null. The gateway calls it at start. Pure.
 */
export function checkInstalledUnitTimeout(options: {
  unitText: string;
  drainTimeoutSeconds: number;
}): string | null {
  const found = installedStopTimeout(options.unitText);
  if (found === null) return null;
  const required = minimumStopTimeout(options.drainTimeoutSeconds);
  if (found.seconds >= required) return null;
  const what = found.name === "ExitTimeOut" ? "launchd job's" : "unit's";
  return (
    `installed ${what} ${found.name}=${found.shown} is shorter than restart_drain_timeout ` +
    `(${required - STOP_MARGIN_SECONDS}s) + ${STOP_MARGIN_SECONDS}s, so the supervisor would kill the gateway mid-drain; ` +
    "run `keel gateway install --force` to regenerate it"
  );
}

/**
 * Reads whichever service file is installed for this platform (user unit, system unit or plist)
 * and returns {@link checkInstalledUnitTimeout}'s warning for the first stale one. Never throws.
 */
export async function checkInstalledServiceTimeout(
  options: { drainTimeoutSeconds: number },
  deps: Omit<ServiceDeps, "run" | "uid">,
): Promise<string | null> {
  try {
    const kind = serviceKindFor(deps.platform);
    const candidates = kind === "systemd" ? [false, true] : [false];
    for (const system of candidates) {
      const text = await readIfExists(serviceUnitPath(deps, system));
      const warning =
        text === null ? null : checkInstalledUnitTimeout({ unitText: text, ...options });
      if (warning !== null) return warning;
    }
  } catch {
    // Unsupported platform or unreadable file: nothing installed that we could check.
  }
  return null;
}

/** The real {@link RunCommand}: `execFile` without a shell, 60 s timeout, never throws. */
export function runCommand(argv: readonly string[]): Promise<RunResult> {
  const [file, ...args] = argv;
  if (file === undefined)
    return Promise.resolve({ code: 127, stdout: "", stderr: "empty command" });
  return new Promise((resolve) => {
    execFile(file, args, { encoding: "utf8", timeout: 60_000 }, (err, stdout, stderr) => {
      if (err === null) return resolve({ code: 0, stdout, stderr });
      const code = typeof err.code === "number" ? err.code : err.code === "ENOENT" ? 127 : 1;
      resolve({ code, stdout, stderr: stderr || err.message });
    });
  });
}

/** Absolute path of `bin/keel.js` in this installation (works from `src/`, `dist/` and the bundle in `dist/bundle/`). */
export function defaultKeelEntry(): string {
  return fileURLToPath(new URL("../../bin/keel.js", import.meta.url));
}
