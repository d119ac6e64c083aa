/**
 * Real `keel gateway run` processes for Telegram e2e tests (needs `npm run build`). A restart
 * outside a service manager hands over to a detached successor, so the helper follows the
 * gateway through `gateway.pid` and `logs/gateway.log`, and `cleanup()` kills whatever gateway
 * the home folder names at the end.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "./wait-for.js";

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const KEEL_BIN = join(REPO_ROOT, "bin", "keel.js");

/** One `keel gateway run` started by a test, plus the successors it hands over to. */
export interface SpawnedGateway {
  /** The first process. */
  readonly child: ChildProcess;
  readonly home: string;
  /** Output of the processes this helper spawned (detached successors write to `logs/`). */
  output(): string;
  /** Resolves with the first process's exit code; rejects after `timeoutMs`. */
  waitForExit(timeoutMs?: number): Promise<number | null>;
  /** Kills every process spawned here and any gateway `gateway.pid` names; safe to call twice. */
  cleanup(): Promise<void>;
}

/** The sanitized parent environment (no OPENAI_/TELEGRAM_/KEEL_ leaks) plus `extra`. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(OPENAI_|TELEGRAM_|KEEL_)/.test(name)) continue;
    if (name === "INVOCATION_ID" || name === "XPC_SERVICE_NAME" || name === "NOTIFY_SOCKET")
      continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** Exit code 75: "restart me", what Keel exits with for a restart inside a container. */
const EXIT_RESTART = 75;

/**
 * Spawns `node bin/keel.js --home <home> gateway run` with `env`. The helper plays the part of
 * the supervisor: inside a container (`/.dockerenv`) a restart exits 75 and the helper starts
 * the next process, as a restart policy would; elsewhere the gateway's own detached successor
 * takes over and the helper only cleans it up.
 */
export function spawnGateway(home: string, env: Record<string, string>): SpawnedGateway {
  if (!existsSync(join(REPO_ROOT, "dist", "main.js")))
    throw new Error("dist/main.js is missing: run `npm run build` before the e2e tests");
  let output = "";
  let cleaningUp = false;
  const children: ChildProcess[] = [];
  const launch = (): ChildProcess => {
    const child = spawn(process.execPath, [KEEL_BIN, "--home", home, "gateway", "run"], {
      cwd: REPO_ROOT,
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    child.stdout?.setEncoding("utf8").on("data", (s: string) => (output += s));
    child.stderr?.setEncoding("utf8").on("data", (s: string) => (output += s));
    child.once("close", (code) => {
      if (code === EXIT_RESTART && !cleaningUp) launch();
    });
    return child;
  };
  const first = launch();
  const exited = new Promise<number | null>((done) => first.once("close", (code) => done(code)));
  return {
    child: first,
    home,
    output: () => output,
    async waitForExit(timeoutMs = 20_000) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, fail) => {
        timer = setTimeout(
          () => fail(new Error(`gateway ${first.pid} still running\n${output.slice(-3000)}`)),
          timeoutMs,
        );
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
    async cleanup() {
      cleaningUp = true;
      const pids = new Set<number>();
      for (const child of children) {
        if (child.exitCode === null && child.signalCode === null && child.pid) pids.add(child.pid);
      }
      const named = gatewayPid(home);
      if (named !== null && named !== process.pid) pids.add(named);
      for (const pid of pids) killQuietly(pid, "SIGKILL");
      await waitFor(() => [...pids].every((pid) => !isAlive(pid)), {
        timeoutMs: 5000,
        message: "spawned gateways gone",
      });
    },
  };
}

/** The pid `gateway.pid` names, or null. */
export function gatewayPid(home: string): number | null {
  try {
    const record = JSON.parse(readFileSync(join(home, "gateway.pid"), "utf8")) as { pid?: unknown };
    return typeof record.pid === "number" ? record.pid : null;
  } catch {
    return null;
  }
}

/** The pids that logged "gateway running" in `logs/gateway.log`, in boot order. */
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

/** `gateway_state.json`, or null when missing or half-written. */
export function gatewayState(home: string): Record<string, unknown> | null {
  try {
    return JSON.parse(readFileSync(join(home, "gateway_state.json"), "utf8")) as Record<
      string,
      unknown
    >;
  } catch {
    return null;
  }
}

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

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}
