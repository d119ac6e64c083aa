import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { waitFor } from "./wait-for.js";

/** The built CLI (`npm run build` first). */
export const KEEL_BIN = resolve(import.meta.dirname, "../../bin/keel.js");

/** A `keel gateway run` child process of the test. */
export interface GatewayProcess {
  child: ChildProcess;
  pid: number;
  home: string;
  url: string;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
}

/** A port that was free a moment ago on 127.0.0.1. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  await new Promise<void>((done) => server.close(() => done()));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/**
 * The parent's environment without anything that configures Keel or names a supervisor, plus
 * `extra`: the gateway sees exactly the settings the test gives it.
 */
export function isolatedEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(OPENAI_|TELEGRAM_|KEEL_)/.test(name)) continue;
    if (name === "INVOCATION_ID" || name === "XPC_SERVICE_NAME") continue;
    env[name] = value;
  }
  return { ...env, ...extra };
}

/** Starts `node bin/keel.js gateway run --home <home>` with `env` (see {@link isolatedEnv}). */
export function spawnGateway(home: string, env: Record<string, string>): GatewayProcess {
  const port = env.KEEL_HTTP_PORT;
  if (!port) throw new Error("give KEEL_HTTP_PORT (freePort())");
  const child = spawn(process.execPath, [KEEL_BIN, "gateway", "run", "--home", home], {
    env: isolatedEnv({ KEEL_LOG_LEVEL: "info", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on("exit", (code, signal) => {
      done = true;
      res({ code, signal });
    }),
  );
  if (child.pid === undefined) throw new Error("gateway did not spawn");
  return {
    child,
    pid: child.pid,
    home,
    url: `http://127.0.0.1:${port}`,
    output: () => output,
    exited,
    hasExited: () => done,
  };
}

/** Waits until `/readyz` answers 200 (or the process exits, which fails the wait). */
export async function waitReady(gw: GatewayProcess, timeoutMs = 15_000): Promise<void> {
  await waitFor(
    async () => {
      if (gw.hasExited()) throw new Error(`gateway exited early:\n${gw.output()}`);
      const res = await fetch(`${gw.url}/readyz`);
      return res.status === 200;
    },
    { timeoutMs, intervalMs: 50, message: `gateway ${gw.pid} ready` },
  );
}

/** The control token the gateway generated into its home. */
export function controlToken(home: string): string {
  return readFileSync(join(home, "control_token"), "utf8").trim();
}

/** `gateway_state.json`, or null. */
export function readState(home: string): Record<string, unknown> | null {
  try {
    return JSON.parse(readFileSync(join(home, "gateway_state.json"), "utf8")) as Record<
      string,
      unknown
    >;
  } catch {
    return null;
  }
}

/** `gateway.pid`, or null. */
export function readPid(home: string): { pid: number; start_time: number } | null {
  try {
    return JSON.parse(readFileSync(join(home, "gateway.pid"), "utf8")) as {
      pid: number;
      start_time: number;
    };
  } catch {
    return null;
  }
}

/** True while a process (or, with a negative id, a process group) exists. */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Kills the process if it still runs, and waits for it to be gone. */
export async function killGateway(gw: GatewayProcess): Promise<void> {
  if (gw.hasExited()) return;
  gw.child.kill("SIGKILL");
  await gw.exited;
}
