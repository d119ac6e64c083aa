/**
 * Real Keel processes for end-to-end tests, the browser tests and the chaos harness:
 * `startGatewayProcess()` spawns the BUILT command line (`node bin/keel.js --home <home> gateway
 * run`) on a free loopback port, `followRestart()` / `adoptSuccessor()` follow it across a planned
 * restart, and `runKeel()` runs a one-shot command (`sessions list`, `doctor`, `chat`, ...).
 * The `read*` functions and `bootedPids()` read what a gateway left in its home.
 *
 * Everything needs `npm run build` first (`npm test` does it); a missing or stale `dist/` is
 * reported up front instead of testing old code.
 *
 * The child's environment is the parent's minus every `OPENAI_*`, `TELEGRAM_*`, `SLACK_*` and `KEEL_*`
 * variable and the service-manager markers (`INVOCATION_ID`, `XPC_SERVICE_NAME`, `NOTIFY_SOCKET`),
 * so a developer's shell or CI never leaks a real model, bot token or home into a test, and a
 * restart under a test never restarts the developer's unit; the test adds what it means
 * (`inheritEnv: false` keeps only `PATH`).
 *
 * Typical use:
 *
 * ```ts
 * let gw: GatewayProcess | undefined;
 * afterEach(async () => { await gw?.stop(); });
 * it("...", async () => {
 *   gw = await startGatewayProcess({ env: { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake" } });
 *   await gw.waitForReady();
 *   const res = await gw.fetch("/v1/models");
 * });
 * ```
 *
 * Restarts: a planned restart ends the process with exit code 75 in a container (the supervisor,
 * here the test, starts the next one) and with 0 elsewhere, where a detached successor the test
 * did not spawn takes over. `restartOnExit75` makes the helper play the supervisor by itself;
 * `followSuccessor` makes `stop()` also kill whatever gateway `<home>/gateway.pid` names.
 */

import { type ChildProcess, spawn } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { EXIT } from "../../src/lib/exit-codes.js";
import { waitFor } from "./wait-for.js";

/** The repository root (this file lives in test/helpers/). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The built entry point every spawned command runs. */
export const KEEL_BIN = join(REPO_ROOT, "bin", "keel.js");
/** The exit code of a planned restart that a supervisor is expected to carry out. */
export const EXIT_RESTART = EXIT.restart;

const DROPPED_ENV_PREFIXES = ["OPENAI_", "TELEGRAM_", "SLACK_", "KEEL_"];
const DROPPED_ENV_NAMES = new Set(["INVOCATION_ID", "XPC_SERVICE_NAME", "NOTIFY_SOCKET"]);

export interface GatewayProcessOptions {
  /**
   * The Keel home folder. When omitted a fresh temporary folder is created and `stop()` removes
   * it; a given folder is left in place (pass the same one to a second process to restart).
   */
  home?: string;
  /**
   * Extra environment for the child, on top of the sanitized parent environment, e.g.
   * `{ OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" }`. `KEEL_HTTP_PORT` given here
   * wins over the free port the helper picks (`"0"` when the test does not need HTTP).
   */
  env?: Record<string, string>;
  /** False: the child inherits only `PATH` from this process, not the sanitized environment. */
  inheritEnv?: boolean;
  /** Command line after `--home <home>`; default `["gateway", "run"]`. */
  args?: string[];
  /**
   * The HTTP port (default: a free loopback port picked before spawning). It always reaches the
   * child as `KEEL_HTTP_PORT`, so an `http.port` in config.yaml is overridden; pass the previous
   * process's `port` to restart on the same address.
   */
  port?: number;
  /** `KEEL_CRASH_POINT` for this process (`name` or `name:N`): it SIGKILLs itself there. */
  crashPoint?: string;
  /**
   * Append the child's stdout and stderr to this file instead of keeping them in memory
   * (`stdout`/`stderr` then stay empty).
   */
  outputFile?: string;
  /** Play the supervisor: whenever a spawned process exits 75, spawn the next one the same way. */
  restartOnExit75?: boolean;
  /** `stop()` also kills the gateway `<home>/gateway.pid` names (a detached successor). */
  followSuccessor?: boolean;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * A spawned `keel gateway run` (or another long-running command), or a successor adopted through
 * `gateway.pid`. With `restartOnExit75` the pid, exit and wait methods are the first process's;
 * `pids` and the output cover every process the helper spawned.
 */
export interface GatewayProcess {
  readonly pid: number;
  /** Every pid spawned for this handle, in order (more than one after `restartOnExit75` restarts). */
  readonly pids: readonly number[];
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  readonly home: string;
  /** The options it was started with (`followRestart` starts the next process with them). */
  readonly options: GatewayProcessOptions;
  /** The control token: `KEEL_CONTROL_TOKEN` when given, else read from `<home>/control_token` (exists once the config loaded). */
  readonly controlToken: string;
  /** Everything the child wrote so far (empty with `outputFile` or for an adopted successor). */
  readonly stdout: string;
  readonly stderr: string;
  /** stdout and stderr interleaved as they arrived. */
  output(): string;
  /** The exit status once the process exited, else null. */
  readonly exitStatus: ExitStatus | null;
  /** Resolves with the exit status once the process is gone (an adopted successor: both null). */
  readonly exited: Promise<ExitStatus>;
  /** Resolves once `GET /readyz` answers 200; rejects (with the output) if the process exits first or on timeout. */
  waitForReady(timeoutMs?: number): Promise<void>;
  /**
   * True once `gateway_state.json` reports this pid `running`; false if the process exits first
   * (a crash point during start-up) or `timeoutMs` passes.
   */
  waitForRunning(timeoutMs: number): Promise<boolean>;
  /** Resolves once stdout+stderr matches `pattern`; rejects if the child exits first or on timeout. */
  waitForOutput(pattern: RegExp | string, timeoutMs?: number): Promise<void>;
  /** Sends a signal (no-op once exited). */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves with the exit status; rejects on timeout (the process is left running). */
  waitForExit(timeoutMs?: number): Promise<ExitStatus>;
  /** True if the process exits (by itself, e.g. a crash point) within `timeoutMs`. */
  exitsWithin(timeoutMs: number): Promise<boolean>;
  /** SIGTERM (a stop), then SIGKILL if it has not exited after `timeoutMs`; resolves with the exit. */
  terminate(timeoutMs?: number): Promise<ExitStatus>;
  /** Parses `<home>/<file>` as JSON; null when the file does not exist. */
  readJson<T = unknown>(file: string): T | null;
  /** `fetch(baseUrl + path)`. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** `fetch` with `Authorization: Bearer <controlToken>` (the control API). */
  control(path: string, init?: RequestInit): Promise<Response>;
  /**
   * SIGKILLs every process of this handle that still runs (and, with `followSuccessor`, the one
   * `gateway.pid` names), waits until they are gone, and removes the home folder when the helper
   * created it. Safe to call more than once; meant for `afterEach`.
   */
  stop(): Promise<void>;
}

/** The sanitized parent environment plus `extra` (see the module comment). */
export function childEnv(extra: Record<string, string> = {}, inherit = true): NodeJS.ProcessEnv {
  if (!inherit) return { PATH: process.env.PATH ?? "/usr/bin:/bin", ...extra };
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || DROPPED_ENV_NAMES.has(name)) continue;
    if (DROPPED_ENV_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** A TCP port free on 127.0.0.1 right now (bound to port 0, read back, released). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", done);
  });
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (!address || typeof address !== "object") throw new Error("could not read a free port");
  return address.port;
}

/** Throws a clear error when `dist/` is missing or older than `src/` (run `npm run build`). */
export function assertBuilt(): void {
  const entry = join(REPO_ROOT, "dist", "bundle", "main.js");
  if (!existsSync(entry)) {
    throw new Error(`${entry} does not exist: run \`npm run build\` before the e2e tests.`);
  }
  const newestSrc = newestMtime(
    join(REPO_ROOT, "src"),
    (f) => f.endsWith(".ts") && !f.endsWith(".test.ts"),
  );
  // The bundle is written last by the build, from scratch: its age is the build's.
  if (newestSrc > statSync(entry).mtimeMs) {
    throw new Error("dist/ is older than src/: run `npm run build` before the e2e tests.");
  }
}

function newestMtime(dir: string, keep: (file: string) => boolean): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !keep(entry.name)) continue;
    newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}

/** True when the built CLI exists (a suite can skip itself otherwise). */
export function isBuilt(): boolean {
  return existsSync(join(REPO_ROOT, "dist", "bundle", "main.js"));
}

/** Spawns `keel --home <home> gateway run` (or `args`) and returns at once; call `waitForReady()`. */
export async function startGatewayProcess(
  options: GatewayProcessOptions = {},
): Promise<GatewayProcess> {
  assertBuilt();
  const ownsHome = options.home === undefined;
  const home = options.home ?? mkdtempSync(join(tmpdir(), "keel-e2e-"));
  const port = Number(options.env?.KEEL_HTTP_PORT ?? options.port ?? (await freePort()));
  const env = childEnv(
    {
      KEEL_HTTP_PORT: String(port),
      ...(options.crashPoint && { KEEL_CRASH_POINT: options.crashPoint }),
      ...options.env,
    },
    options.inheritEnv ?? true,
  );
  const argv = [KEEL_BIN, "--home", home, ...(options.args ?? ["gateway", "run"])];
  const processes = spawnProcesses(argv, env, options);
  const token = env.KEEL_CONTROL_TOKEN;
  return handle(processes, { home, port, ownsHome, options, ...(token && { token }) });
}

/**
 * Waits until `<home>/gateway.pid` names a live process other than `previous.pid` (the detached
 * successor of a restart) and returns a handle to it on the same home and port; its `stop()`
 * kills it. Rejects after `timeoutMs`.
 */
export async function adoptSuccessor(
  previous: Pick<GatewayProcess, "home" | "port" | "pid" | "options">,
  timeoutMs = 20_000,
): Promise<GatewayProcess> {
  const pid = await waitFor(
    () => {
      const named = readGatewayPid(previous.home)?.pid;
      return named && named !== previous.pid && isAlive(named) ? named : null;
    },
    {
      timeoutMs,
      intervalMs: 100,
      message: `a successor of pid ${previous.pid} in ${previous.home}`,
    },
  );
  const { home, port, options } = previous;
  return handle(adoptedProcess(pid), { home, port, ownsHome: false, options });
}

/**
 * After a planned restart of `previous`: waits for it to exit, then plays the supervisor (exit
 * code 75: starts the next process with the same options, home and port) or adopts the detached
 * successor (exit code 0). Returns the new gateway, not yet ready; rejects on any other exit.
 */
export async function followRestart(previous: GatewayProcess): Promise<GatewayProcess> {
  const { code } = await previous.waitForExit();
  if (code === EXIT_RESTART) {
    return startGatewayProcess({ ...previous.options, home: previous.home, port: previous.port });
  }
  if (code === 0) return adoptSuccessor(previous);
  throw new Error(`the gateway exited with ${code}\n${previous.output().slice(-4000)}`);
}

/** What a handle drives: the spawned child(ren), or an adopted pid. */
interface Processes {
  readonly pid: number;
  pids(): number[];
  exitStatus(): ExitStatus | null;
  readonly exited: Promise<ExitStatus>;
  signal(signal: NodeJS.Signals): void;
  /** SIGKILLs every process that still runs and waits until they are gone. */
  killAll(): Promise<void>;
  stdout(): string;
  stderr(): string;
  output(): string;
}

function spawnProcesses(
  argv: string[],
  env: NodeJS.ProcessEnv,
  options: GatewayProcessOptions,
): Processes {
  const out = { stdout: "", stderr: "", both: "" };
  const launched: { child: ChildProcess; closed: Promise<ExitStatus> }[] = [];
  let stopping = false;
  const launch = () => {
    const fd = options.outputFile === undefined ? undefined : openSync(options.outputFile, "a");
    const child = spawn(process.execPath, argv, {
      cwd: REPO_ROOT,
      env,
      stdio: ["ignore", fd ?? "pipe", fd ?? "pipe"],
    });
    if (fd !== undefined) closeSync(fd);
    if (child.pid === undefined) throw new Error(`could not spawn ${KEEL_BIN}`);
    child.stdout?.setEncoding("utf8").on("data", (s: string) => {
      out.stdout += s;
      out.both += s;
    });
    child.stderr?.setEncoding("utf8").on("data", (s: string) => {
      out.stderr += s;
      out.both += s;
    });
    // "close" (not "exit"): stdout and stderr are fully read by then.
    const closed = new Promise<ExitStatus>((done) => {
      child.once("close", (code, signal) => done({ code, signal }));
      child.once("error", () => done({ code: null, signal: null }));
    });
    launched.push({ child, closed });
    void closed.then(({ code }) => {
      if (code === EXIT_RESTART && options.restartOnExit75 && !stopping) launch();
    });
    return { child, closed };
  };
  const first = launch();
  let status: ExitStatus | null = null;
  const exited = first.closed.then((s) => (status = s));
  return {
    pid: first.child.pid as number,
    pids: () => launched.map(({ child }) => child.pid as number),
    exitStatus: () => status,
    exited,
    signal(signal) {
      if (!status && first.child.exitCode === null && first.child.signalCode === null)
        first.child.kill(signal);
    },
    async killAll() {
      stopping = true;
      for (const { child } of launched) {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
      await Promise.all(launched.map(({ closed }) => closed));
      await exited;
    },
    stdout: () => out.stdout,
    stderr: () => out.stderr,
    output: () => out.both,
  };
}

function adoptedProcess(pid: number): Processes {
  let status: ExitStatus | null = null;
  let exited: Promise<ExitStatus> | undefined;
  const gone = () => {
    if (!status && !isAlive(pid)) status = { code: null, signal: null };
    return status;
  };
  return {
    pid,
    pids: () => [pid],
    exitStatus: gone,
    get exited() {
      exited ??= waitFor(gone, {
        timeoutMs: 24 * 3600_000,
        intervalMs: 50,
        message: `pid ${pid} gone`,
      });
      return exited;
    },
    signal(signal) {
      if (!gone()) killQuietly(pid, signal);
    },
    async killAll() {
      killQuietly(pid, "SIGKILL");
      await waitFor(() => !isAlive(pid), { timeoutMs: 5000, message: `pid ${pid} gone` });
    },
    stdout: () => "",
    stderr: () => "",
    output: () => "",
  };
}

interface HandleContext {
  home: string;
  port: number;
  ownsHome: boolean;
  options: GatewayProcessOptions;
  token?: string;
}

function handle(processes: Processes, ctx: HandleContext): GatewayProcess {
  const { home, port, options } = ctx;
  const { pid } = processes;
  const baseUrl = `http://127.0.0.1:${port}`;
  let token = ctx.token;
  const describe = () =>
    `keel (pid ${pid}) exited ${JSON.stringify(processes.exitStatus())}\n--- output ---\n${processes.output().slice(-4000)}`;
  const untilAliveOr = async (
    check: () => boolean | Promise<boolean>,
    timeoutMs: number,
    message: string,
  ) => {
    try {
      await waitFor(
        async () => {
          if (processes.exitStatus()) throw new Error(describe());
          return check();
        },
        { timeoutMs, message },
      );
    } catch (err) {
      if (processes.exitStatus()) throw new Error(`${message}: ${describe()}`);
      throw new Error(
        `${(err as Error).message}\n--- output ---\n${processes.output().slice(-4000)}`,
      );
    }
  };
  const readToken = (): string => {
    if (token) return token;
    const file = join(home, "control_token");
    if (!existsSync(file))
      throw new Error(`${file} does not exist yet (wait for the gateway first)`);
    token = readFileSync(file, "utf8").trim();
    return token;
  };
  const raceExit = async <T>(timeoutMs: number, onTimeout: () => T): Promise<ExitStatus | T> => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<T>((done) => {
      timer = setTimeout(() => done(onTimeout()), timeoutMs);
    });
    try {
      return await Promise.race([processes.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
  let stopped = false;

  return {
    pid,
    get pids() {
      return processes.pids();
    },
    port,
    baseUrl,
    home,
    options,
    get controlToken() {
      return readToken();
    },
    get stdout() {
      return processes.stdout();
    },
    get stderr() {
      return processes.stderr();
    },
    output: () => processes.output(),
    get exitStatus() {
      return processes.exitStatus();
    },
    get exited() {
      return processes.exited;
    },
    async waitForReady(timeoutMs = 15_000) {
      await untilAliveOr(
        async () => {
          const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(1000) });
          await res.body?.cancel();
          return res.status === 200;
        },
        timeoutMs,
        `keel (pid ${pid}) ready at ${baseUrl}/readyz`,
      );
    },
    async waitForRunning(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        if (processes.exitStatus()) return false;
        const state = readGatewayState(home);
        if (state?.pid === pid && state.gateway_state === "running") return true;
        await new Promise((done) => setTimeout(done, 25));
      }
      return false;
    },
    async waitForOutput(pattern, timeoutMs = 10_000) {
      const test = (s: string) =>
        typeof pattern === "string" ? s.includes(pattern) : pattern.test(s);
      // Output written just before exiting still counts: check it before the liveness check.
      if (test(processes.output())) return;
      await untilAliveOr(
        () => test(processes.output()),
        timeoutMs,
        `output matching ${String(pattern)}`,
      ).catch((err: unknown) => {
        if (!test(processes.output())) throw err;
      });
    },
    kill(signal = "SIGTERM") {
      processes.signal(signal);
    },
    async waitForExit(timeoutMs = 15_000) {
      const result = await raceExit(timeoutMs, () => null);
      if (result === null) {
        throw new Error(
          `keel (pid ${pid}) still running after ${timeoutMs} ms\n--- output ---\n${processes.output().slice(-4000)}`,
        );
      }
      return result;
    },
    async exitsWithin(timeoutMs) {
      if (processes.exitStatus()) return true;
      return (await raceExit(timeoutMs, () => null)) !== null;
    },
    async terminate(timeoutMs = 15_000) {
      const done = processes.exitStatus();
      if (done) return done;
      processes.signal("SIGTERM");
      const timer = setTimeout(() => processes.signal("SIGKILL"), timeoutMs);
      const status = await processes.exited;
      clearTimeout(timer);
      return status;
    },
    readJson<T>(file: string): T | null {
      const path = join(home, file);
      if (!existsSync(path)) return null;
      return JSON.parse(readFileSync(path, "utf8")) as T;
    },
    fetch(path, init) {
      return fetch(`${baseUrl}${path}`, init);
    },
    control(path, init = {}) {
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${readToken()}`);
      return fetch(`${baseUrl}${path}`, { ...init, headers });
    },
    async stop() {
      await processes.killAll();
      if (options.followSuccessor && !stopped) await killNamedGateway(home);
      stopped = true;
      if (ctx.ownsHome) rmSync(home, { recursive: true, force: true });
    },
  };
}

/** `<home>/gateway.pid`, or null when missing or half-written. */
export function readGatewayPid(home: string): { pid: number; start_time: number } | null {
  try {
    const record = JSON.parse(readFileSync(join(home, "gateway.pid"), "utf8")) as {
      pid?: unknown;
      start_time: number;
    };
    return typeof record.pid === "number"
      ? { pid: record.pid, start_time: record.start_time }
      : null;
  } catch {
    return null;
  }
}

/** `<home>/gateway_state.json`, or null when missing or half-written. */
export function readGatewayState(home: string): Record<string, unknown> | null {
  try {
    return JSON.parse(readFileSync(join(home, "gateway_state.json"), "utf8")) as Record<
      string,
      unknown
    >;
  } catch {
    return null;
  }
}

/** The pids that logged "gateway running" in `<home>/logs/gateway.log`, in boot order. */
export function bootedPids(home: string): number[] {
  let text = "";
  try {
    text = readFileSync(join(home, "logs", "gateway.log"), "utf8");
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const line of text.split("\n")) {
    if (!line.includes('"gateway running"')) continue;
    try {
      pids.push((JSON.parse(line) as { pid: number }).pid);
    } catch {
      // A line cut off by SIGKILL is not a boot.
    }
  }
  return pids;
}

/** True while `pid` exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return true;
  }
}

/** The test process's own process group (Linux), which the test runner and CI job share. */
function ownProcessGroup(): number | null {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
  } catch {
    return null;
  }
}

/**
 * `process.kill`, ignoring a process (or, with a negative id, a group) that is already gone.
 * Refuses to signal this test process, its group (or its leader), every process (-1) or a pid
 * that is not one: a wrong pid read from a half-started child must fail the test, not SIGKILL
 * the runner and the CI job around it.
 */
export function killQuietly(pid: number, signal: NodeJS.Signals = "SIGKILL"): void {
  const own = ownProcessGroup();
  if (
    !Number.isInteger(pid) ||
    Math.abs(pid) <= 1 ||
    pid === process.pid ||
    Math.abs(pid) === own
  ) {
    throw new Error(`refusing to send ${signal} to ${pid}: that is this test process or its group`);
  }
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}

/** SIGKILLs the gateway `<home>/gateway.pid` names (a detached successor), and waits until it is gone. */
export async function killNamedGateway(home: string): Promise<void> {
  const named = readGatewayPid(home)?.pid;
  if (named === undefined || named === process.pid) return;
  killQuietly(named, "SIGKILL");
  await waitFor(() => !isAlive(named), { timeoutMs: 5000, message: `pid ${named} gone` });
}

export interface RunKeelOptions {
  home: string;
  /** CLI arguments after `--home <home>`, e.g. `["sessions", "list"]`. */
  args: string[];
  /** Extra environment (on top of the sanitized parent environment). */
  env?: Record<string, string>;
  /** Written to stdin, which is then closed (default: stdin closed at once). */
  input?: string;
  /** The command is SIGKILLed and the promise rejects after this long (default 20 s). */
  timeoutMs?: number;
}

export interface RunKeelResult extends ExitStatus {
  stdout: string;
  stderr: string;
}

/** Runs a one-shot `keel --home <home> ...args` to its end and returns its exit status and output. */
export async function runKeel(options: RunKeelOptions): Promise<RunKeelResult> {
  assertBuilt();
  const child = spawn(process.execPath, [KEEL_BIN, "--home", options.home, ...options.args], {
    cwd: REPO_ROOT,
    env: childEnv(options.env),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  child.stdin.end(options.input ?? "");
  const timeoutMs = options.timeoutMs ?? 20_000;
  return new Promise<RunKeelResult>((done, fail) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(
        new Error(
          `keel ${options.args.join(" ")} did not finish within ${timeoutMs} ms\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`,
        ),
      );
    }, timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      fail(err);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      done({ code, signal, stdout, stderr });
    });
  });
}
