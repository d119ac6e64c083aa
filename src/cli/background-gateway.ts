/**
 * A gateway in the background: spawned detached in its own session and process group, output
 * appended to `logs/gateway.out.log`, and the wait until it is ready (or died, or took too long).
 */
import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Env } from "../config/load-config.js";
import { withMallocTunables } from "../lib/malloc-tunables.js";
import type { PidRecord } from "../lifecycle/pid-file.js";
import { defaultKeelEntry } from "../service/install.js";
import {
  type ControlTarget,
  fetchOwnApiStatus,
  gatewayBaseUrl,
  liveGateway,
  pollUntil,
  probeReady,
} from "./gateway-probe.js";

/** How a spawned process ended (`error` when it could not be started at all). */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: string;
}

/** The output log of background gateways (the gateway's own JSON log is `logs/gateway.log`). */
export function outputLogPath(home: string): string {
  return join(home, "logs", "gateway.out.log");
}

/**
 * Starts `keel gateway run --home <home> --no-supervisor` detached (new session, so it outlives
 * this command and a closed terminal), stdin closed, stdout and stderr appended to `logFile`.
 * `--no-supervisor`: nothing supervises it, so its restarts must start a detached successor even
 * inside a container or under an inherited `INVOCATION_ID`.
 */
export function spawnBackgroundGateway(options: { home: string; env: Env; logFile: string }): {
  pid: number | null;
  /** Settles when the process has exited (or could not be started). */
  exited: Promise<ExitInfo>;
} {
  mkdirSync(dirname(options.logFile), { recursive: true, mode: 0o700 });
  const fd = openSync(options.logFile, "a", 0o600);
  let settle!: (exit: ExitInfo) => void;
  const exited = new Promise<ExitInfo>((resolve) => (settle = resolve));
  try {
    const env: NodeJS.ProcessEnv = {};
    for (const [name, value] of Object.entries(withMallocTunables(options.env))) {
      if (value !== undefined) env[name] = value;
    }
    const child = spawn(
      process.execPath,
      [defaultKeelEntry(), "gateway", "run", "--home", options.home, "--no-supervisor"],
      { detached: true, stdio: ["ignore", fd, fd], env, cwd: options.home },
    );
    child.once("exit", (code, signal) => settle({ code, signal }));
    child.once("error", (error) => settle({ code: null, signal: null, error: error.message }));
    child.unref();
    return { pid: child.pid ?? null, exited };
  } finally {
    closeSync(fd);
  }
}

export type ReadyOutcome =
  | { kind: "ready"; pid: number }
  /** Running, but an external drain keeps `/readyz` at 503 on purpose. */
  | { kind: "drained"; pid: number }
  | { kind: "exited"; exit: ExitInfo }
  /** `pid`: the last accepted live gateway seen, if any. */
  | { kind: "timeout"; pid: number | null };

/**
 * Waits until a live gateway of this home that `accept` takes (the spawned pid, or any pid but the
 * old one after a restart) is ready at the configured address — `/readyz` 200, and the control API
 * there reports that pid (another home's gateway or another program on the port is not ready for
 * us) — or is up but drained. Gives up as soon as `exited` settles (the spawned process is gone;
 * a probe hanging on whatever holds the port is not waited for) or when `timeoutMs` passes.
 */
export async function waitUntilReady(
  config: ControlTarget & { home: string },
  options: {
    accept(record: PidRecord): boolean;
    exited?: Promise<ExitInfo>;
    timeoutMs: number;
  },
): Promise<ReadyOutcome> {
  const baseUrl = gatewayBaseUrl(config.http);
  let lastPid: number | null = null;
  let exit: ExitInfo | null = null;
  const exitOutcome = options.exited?.then((info): ReadyOutcome => {
    exit = info;
    return { kind: "exited", exit: info };
  });
  const check = async (): Promise<ReadyOutcome | null> => {
    const record = await liveGateway(config.home);
    if (record === null || !options.accept(record)) return null;
    lastPid = record.pid;
    const own = await fetchOwnApiStatus(config, record);
    if (own === null) return null;
    const ready = await probeReady(baseUrl);
    if (ready === true) return { kind: "ready", pid: record.pid };
    if (ready === false && own.draining) return { kind: "drained", pid: record.pid };
    return null;
  };
  const outcome = await pollUntil<ReadyOutcome>(
    () => {
      if (exit !== null) return Promise.resolve({ kind: "exited", exit });
      return exitOutcome ? Promise.race([check(), exitOutcome]) : check();
    },
    { timeoutMs: options.timeoutMs, intervalMs: 200 },
  );
  return outcome ?? { kind: "timeout", pid: lastPid };
}

/** "exit code 1", "signal SIGKILL" or the spawn error. Pure. */
export function describeExit(exit: ExitInfo): string {
  if (exit.error !== undefined) return `could not be started: ${exit.error}`;
  if (exit.signal !== null) return `was killed by ${exit.signal}`;
  return `exited with code ${exit.code}`;
}
