/**
 * Spawns the BUILT gateway (`node bin/keel.js --home <home> gateway run`, so `npm run build`
 * first) on a given loopback port, for browser and end-to-end tests. The child's environment is
 * the parent's without any `OPENAI_*`, `TELEGRAM_*` or `KEEL_*` variable (a developer's shell
 * must not leak a real model or bot into a test) and without the service-manager markers (a
 * restart under a test must never restart the developer's systemd unit), plus what the test
 * passes.
 *
 * A planned restart ends the process with exit code 75 in a container (the supervisor starts the
 * next one: here, the test) and 0 elsewhere, where a detached successor the test did not spawn
 * takes over: {@link waitForSuccessor} finds it through `<home>/gateway.pid` so it can be stopped.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "./wait-for.js";

/** The repository root (this file lives in test/helpers/). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const KEEL_BIN = join(REPO_ROOT, "bin", "keel.js");
const DROPPED_PREFIXES = ["OPENAI_", "TELEGRAM_", "KEEL_"];
const DROPPED_NAMES = new Set(["INVOCATION_ID", "NOTIFY_SOCKET", "XPC_SERVICE_NAME"]);

export interface SpawnGatewayOptions {
  /** The Keel home folder (the caller creates and removes it). */
  home: string;
  /** The HTTP port; reaches the child as `KEEL_HTTP_PORT`. */
  port: number;
  /** Extra environment, e.g. `{ OPENAI_BASE_URL: fake.baseUrl }`. */
  env?: Record<string, string>;
}

/** A gateway process the test started (or adopted after a restart). */
export interface SpawnedGateway {
  readonly pid: number;
  readonly baseUrl: string;
  /** What the child wrote to stdout and stderr so far (empty for an adopted successor). */
  output(): string;
  /** Resolves once `GET /readyz` answers 200; rejects with the output on timeout or exit. */
  waitReady(timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code once the process is gone (null after a signal or when adopted). */
  waitExit(timeoutMs?: number): Promise<number | null>;
  /** SIGKILLs the process if it still runs and waits until it is gone. Safe to call twice. */
  kill(): Promise<void>;
}

/** The parent's environment without the variables above, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || DROPPED_NAMES.has(name)) continue;
    if (DROPPED_PREFIXES.some((p) => name.startsWith(p))) continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", done);
  });
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (!address || typeof address !== "object") throw new Error("no free port");
  return address.port;
}

/** Throws a clear error when `dist/` is missing (run `npm run build`). */
export function assertBuilt(): void {
  if (!existsSync(join(REPO_ROOT, "dist", "main.js"))) {
    throw new Error("dist/main.js is missing: run `npm run build` before these tests.");
  }
}

/** Spawns the gateway and returns at once; call `waitReady()`. */
export function spawnGateway(options: SpawnGatewayOptions): SpawnedGateway {
  assertBuilt();
  const child = spawn(process.execPath, [KEEL_BIN, "--home", options.home, "gateway", "run"], {
    cwd: REPO_ROOT,
    env: cleanEnv({ ...options.env, KEEL_HTTP_PORT: String(options.port) }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (child.pid === undefined) throw new Error(`could not spawn ${KEEL_BIN}`);
  let output = "";
  child.stdout?.setEncoding("utf8").on("data", (s: string) => (output += s));
  child.stderr?.setEncoding("utf8").on("data", (s: string) => (output += s));
  const exited = new Promise<number | null>((done) => child.once("close", (code) => done(code)));
  return handle(child.pid, options.port, {
    output: () => output,
    running: () => child.exitCode === null && child.signalCode === null,
    exited: () => exited,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  });
}

/**
 * Waits until `<home>/gateway.pid` names a live process other than `oldPid` (the successor
 * a restart started) and returns a handle to it.
 */
export async function waitForSuccessor(
  home: string,
  port: number,
  oldPid: number,
  timeoutMs = 20_000,
): Promise<SpawnedGateway> {
  const pid = await waitFor(
    () => {
      const record = JSON.parse(readFileSync(join(home, "gateway.pid"), "utf8")) as {
        pid?: number;
      };
      return record.pid && record.pid !== oldPid && isAlive(record.pid) ? record.pid : null;
    },
    { timeoutMs, intervalMs: 100, message: `a successor of pid ${oldPid} in ${home}` },
  );
  return handle(pid, port, {
    output: () => "",
    running: () => isAlive(pid),
    exited: async () => {
      await waitFor(() => !isAlive(pid), { timeoutMs: 60_000, message: `pid ${pid} gone` });
      return null;
    },
    kill: async () => {
      if (isAlive(pid)) process.kill(pid, "SIGKILL");
      await waitFor(() => !isAlive(pid), { timeoutMs: 5000, message: `pid ${pid} gone` });
    },
  });
}

/** True while `pid` exists and is not a zombie. */
function isAlive(pid: number): boolean {
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

interface ProcessOps {
  output(): string;
  running(): boolean;
  exited(): Promise<number | null>;
  kill(): Promise<void>;
}

function handle(pid: number, port: number, ops: ProcessOps): SpawnedGateway {
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    pid,
    baseUrl,
    output: ops.output,
    kill: ops.kill,
    async waitExit(timeoutMs = 15_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, fail) => {
        timer = setTimeout(() => fail(new Error(`pid ${pid} still running`)), timeoutMs);
      });
      try {
        return await Promise.race([ops.exited(), timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    async waitReady(timeoutMs = 15_000) {
      try {
        await waitFor(
          async () => {
            if (!ops.running()) throw new Error(`gateway pid ${pid} exited`);
            const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(1000) });
            await res.body?.cancel();
            return res.status === 200;
          },
          { timeoutMs, intervalMs: 100, message: `gateway pid ${pid} ready at ${baseUrl}` },
        );
      } catch (error) {
        throw new Error(
          `${(error as Error).message}\n--- output ---\n${ops.output().slice(-4000)}`,
        );
      }
    },
  };
}
