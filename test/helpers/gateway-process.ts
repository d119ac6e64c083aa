/**
 * Real Keel processes for end-to-end tests: `startGatewayProcess()` spawns the BUILT command line
 * (`node bin/keel.js --home <home> gateway run`) on a free loopback port, and `runKeel()` runs a
 * one-shot command (`sessions list`, `doctor`, `chat`, ...) against the same home.
 *
 * Both need `npm run build` first (`npm test` does it); a missing or stale `dist/` is reported
 * up front instead of testing old code.
 *
 * The child's environment is the parent's minus every `OPENAI_*`, `TELEGRAM_*` and `KEEL_*`
 * variable and the service-manager markers (`INVOCATION_ID`, `XPC_SERVICE_NAME`), so a developer's
 * shell or CI never leaks a real model, bot token or home into a test; the test adds what it means.
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
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "./wait-for.js";

/** The repository root (this file lives in test/helpers/). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The built entry point every spawned command runs. */
export const KEEL_BIN = join(REPO_ROOT, "bin", "keel.js");

const DROPPED_ENV_PREFIXES = ["OPENAI_", "TELEGRAM_", "KEEL_"];
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
   * wins over the free port the helper picks.
   */
  env?: Record<string, string>;
  /** Command line after `--home <home>`; default `["gateway", "run"]`. */
  args?: string[];
  /**
   * The HTTP port (default: a free loopback port picked before spawning). It always reaches the
   * child as `KEEL_HTTP_PORT`, so an `http.port` in config.yaml is overridden; pass the previous
   * process's `port` to restart on the same address.
   */
  port?: number;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A spawned `keel gateway run` (or another long-running command). */
export interface GatewayProcess {
  readonly pid: number;
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly baseUrl: string;
  readonly home: string;
  /** The control token: `KEEL_CONTROL_TOKEN` when given, else read from `<home>/control_token` (exists once the config loaded). */
  readonly controlToken: string;
  /** Everything the child wrote so far. */
  readonly stdout: string;
  readonly stderr: string;
  /** The exit status once the child exited, else null. */
  readonly exitStatus: ExitStatus | null;
  /** Resolves once `GET /readyz` answers 200; rejects (with stderr) if the child exits first or on timeout. */
  waitForReady(timeoutMs?: number): Promise<void>;
  /** Resolves once stdout+stderr matches `pattern`; rejects if the child exits first or on timeout. */
  waitForOutput(pattern: RegExp | string, timeoutMs?: number): Promise<void>;
  /** Sends a signal (no-op once exited). */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves with the exit status; rejects on timeout (the child is left running). */
  waitForExit(timeoutMs?: number): Promise<ExitStatus>;
  /** Parses `<home>/<file>` as JSON; null when the file does not exist. */
  readJson<T = unknown>(file: string): T | null;
  /** `fetch(baseUrl + path)`. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** `fetch` with `Authorization: Bearer <controlToken>` (the control API). */
  control(path: string, init?: RequestInit): Promise<Response>;
  /**
   * SIGKILLs the child if it is still running, waits for it, and removes the home folder when
   * the helper created it. Safe to call more than once; meant for `afterEach`.
   */
  stop(): Promise<void>;
}

/** The sanitized parent environment plus `extra` (see the module comment). */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
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
  const entry = join(REPO_ROOT, "dist", "main.js");
  if (!existsSync(entry)) {
    throw new Error(`${entry} does not exist: run \`npm run build\` before the e2e tests.`);
  }
  const newestSrc = newestMtime(
    join(REPO_ROOT, "src"),
    (f) => f.endsWith(".ts") && !f.endsWith(".test.ts"),
  );
  const newestDist = newestMtime(join(REPO_ROOT, "dist"), (f) => f.endsWith(".js"));
  if (newestSrc > newestDist) {
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

/** Spawns `keel --home <home> gateway run` (or `args`) and returns at once; call `waitForReady()`. */
export async function startGatewayProcess(
  options: GatewayProcessOptions = {},
): Promise<GatewayProcess> {
  assertBuilt();
  const ownsHome = options.home === undefined;
  const home = options.home ?? mkdtempSync(join(tmpdir(), "keel-e2e-"));
  const port = Number(options.env?.KEEL_HTTP_PORT ?? options.port ?? (await freePort()));
  const env = childEnv({ KEEL_HTTP_PORT: String(port), ...options.env });
  const args = options.args ?? ["gateway", "run"];
  const child = spawn(process.execPath, [KEEL_BIN, "--home", home, ...args], {
    cwd: REPO_ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  return wrap(child, { home, port, ownsHome, env });
}

function wrap(
  child: ChildProcess,
  ctx: { home: string; port: number; ownsHome: boolean; env: NodeJS.ProcessEnv },
): GatewayProcess {
  const { home, port } = ctx;
  const baseUrl = `http://127.0.0.1:${port}`;
  let stdout = "";
  let stderr = "";
  let exitStatus: ExitStatus | null = null;
  let token: string | undefined = ctx.env.KEEL_CONTROL_TOKEN;
  child.stdout?.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr?.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  // "close" (not "exit"): stdout and stderr are fully read by then.
  const exited = new Promise<ExitStatus>((done) => {
    child.once("close", (code, signal) => {
      exitStatus = { code, signal };
      done(exitStatus);
    });
  });
  const spawnError = new Promise<Error>((done) => child.once("error", done));
  if (child.pid === undefined) {
    throw new Error(`could not spawn ${KEEL_BIN}`);
  }
  const pid = child.pid;
  const describe = () =>
    `keel (pid ${pid}) exited ${JSON.stringify(exitStatus)}\n--- stderr ---\n${stderr.slice(-4000)}`;
  const mustBeAlive = () => {
    if (exitStatus) throw new ExitedError(describe());
  };
  const untilAliveOr = async (
    check: () => boolean | Promise<boolean>,
    timeoutMs: number,
    message: string,
  ) => {
    try {
      await waitFor(
        async () => {
          mustBeAlive();
          return check();
        },
        { timeoutMs, message },
      );
    } catch (err) {
      if (exitStatus) throw new Error(`${message}: ${describe()}`);
      throw new Error(`${(err as Error).message}\n--- stderr ---\n${stderr.slice(-4000)}`);
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

  const proc: GatewayProcess = {
    pid,
    port,
    baseUrl,
    home,
    get controlToken() {
      return readToken();
    },
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    get exitStatus() {
      return exitStatus;
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
    async waitForOutput(pattern, timeoutMs = 10_000) {
      const test = (s: string) =>
        typeof pattern === "string" ? s.includes(pattern) : pattern.test(s);
      // Output written just before exiting still counts: check it before the liveness check.
      if (test(stdout + stderr)) return;
      await untilAliveOr(
        () => test(stdout + stderr),
        timeoutMs,
        `output matching ${String(pattern)}`,
      ).catch((err: unknown) => {
        if (!test(stdout + stderr)) throw err;
      });
    },
    kill(signal = "SIGTERM") {
      if (!exitStatus) child.kill(signal);
    },
    async waitForExit(timeoutMs = 15_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, fail) => {
        timer = setTimeout(
          () =>
            fail(
              new Error(
                `keel (pid ${pid}) still running after ${timeoutMs} ms\n--- stderr ---\n${stderr.slice(-4000)}`,
              ),
            ),
          timeoutMs,
        );
      });
      try {
        return await Promise.race([exited, timeout, spawnError.then((e) => Promise.reject(e))]);
      } finally {
        clearTimeout(timer);
      }
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
      if (!exitStatus && child.exitCode === null && child.signalCode === null)
        child.kill("SIGKILL");
      await Promise.race([exited, spawnError]);
      if (ctx.ownsHome) rmSync(home, { recursive: true, force: true });
    },
  };
  return proc;
}

class ExitedError extends Error {}

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
