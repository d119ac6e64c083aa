/**
 * The BUILT gateway as a child process for benchmarks: `node bin/keel.js --home <home> gateway
 * run` with the parent's environment minus `OPENAI_*`, `TELEGRAM_*`, `KEEL_*` (see
 * test/helpers/gateway-process.ts) plus Keel's malloc settings (src/lib/malloc-tunables.ts),
 * output appended to a file so the benchmark process does not pay for reading it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { withMallocTunables } from "../src/lib/malloc-tunables.js";
import { childEnv, KEEL_BIN, REPO_ROOT } from "../test/helpers/gateway-process.js";
import { HttpClient } from "./http-client.js";

export interface GatewayChildOptions {
  home: string;
  port: number;
  /** Added to the cleaned environment (model URL, model name, ...). */
  env: Record<string, string>;
  /** Where stdout and stderr go. */
  outputFile: string;
  /** Extra node flags, e.g. `--cpu-prof`. */
  nodeArgs?: string[];
  /** Preload bench/loop-delay-probe.mjs and open an IPC channel to read it (`loopDelay`). */
  loopDelayProbe?: boolean;
}

export interface LoopDelay {
  p50: number;
  p99: number;
  max: number;
}

const PROBE = join(REPO_ROOT, "bench", "loop-delay-probe.mjs");

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when the child's "exit" event fired. */
  at: number;
}

/** A process's resident set size from /proc/<pid>/status, in MB. */
export function processRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? Number.NaN);
  return kb / 1024;
}

/** Clock ticks per second in /proc/<pid>/stat (USER_HZ: 100 on Linux's common builds). */
const USER_HZ = 100;

/** CPU time (user + system) a process has used so far, from /proc/<pid>/stat, in ms. */
export function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces), from field 3 on: utime is 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ;
}

export class GatewayChild {
  readonly baseUrl: string;
  /** performance.now() just before spawn. */
  readonly spawnedAt: number;
  readonly exited: Promise<ExitInfo>;
  private exitInfo: ExitInfo | null = null;
  private readonly http: HttpClient;

  private constructor(
    private readonly child: ChildProcess,
    spawnedAt: number,
    private readonly options: GatewayChildOptions,
  ) {
    this.spawnedAt = spawnedAt;
    this.baseUrl = `http://127.0.0.1:${options.port}`;
    this.http = new HttpClient(this.baseUrl);
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitInfo = { code, signal, at: performance.now() };
        resolve(this.exitInfo);
      });
    });
  }

  static spawn(options: GatewayChildOptions): GatewayChild {
    const out = openSync(options.outputFile, "a");
    // Started as Keel starts a gateway itself (service unit, `keel gateway start`, Docker image).
    const env = withMallocTunables(
      childEnv({ ...options.env, KEEL_HTTP_PORT: String(options.port) }),
    );
    const probe = options.loopDelayProbe ? ["--import", PROBE] : [];
    const args = [
      ...(options.nodeArgs ?? []),
      ...probe,
      KEEL_BIN,
      "--home",
      options.home,
      "gateway",
      "run",
    ];
    const spawnedAt = performance.now();
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env,
      stdio: options.loopDelayProbe ? ["ignore", out, out, "ipc"] : ["ignore", out, out],
    });
    closeSync(out);
    if (child.pid === undefined) throw new Error(`could not spawn ${KEEL_BIN}`);
    return new GatewayChild(child, spawnedAt, options);
  }

  /** `Authorization` with the control token the child wrote into its home (every route needs it). */
  authHeaders(): Record<string, string> {
    const token = readFileSync(join(this.options.home, "control_token"), "utf8").trim();
    return { authorization: `Bearer ${token}` };
  }

  get pid(): number {
    return this.child.pid!;
  }

  /**
   * Polls `GET /readyz` every `intervalMs` until it answers 200; resolves with the ms from spawn.
   * Rejects (with the child's output) if the child exits or `timeoutMs` passes.
   */
  async waitReady(intervalMs = 5, timeoutMs = 20_000): Promise<number> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (this.exitInfo) throw new Error(`gateway exited before ready:\n${this.output()}`);
      const status = await this.http.getStatus("/readyz").catch(() => 0);
      if (status === 200) return performance.now() - this.spawnedAt;
      await sleep(intervalMs);
    }
    throw new Error(`gateway not ready within ${timeoutMs} ms:\n${this.output()}`);
  }

  /** Starts a fresh event-loop delay window (needs `loopDelayProbe`). */
  async resetLoopDelay(): Promise<void> {
    await this.probe("reset");
  }

  /** Event-loop delay percentiles (ms) since the last reset (needs `loopDelayProbe`). */
  readLoopDelay(): Promise<LoopDelay> {
    return this.probe("read") as Promise<LoopDelay>;
  }

  /** process.memoryUsage() of the gateway, in bytes (needs `loopDelayProbe`). */
  memoryUsage(): Promise<NodeJS.MemoryUsage> {
    return this.probe("memory") as Promise<NodeJS.MemoryUsage>;
  }

  private probe(kind: "reset" | "read" | "memory"): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const onMessage = (message: { probe?: string }) => {
        if (message?.probe !== kind) return;
        this.child.off("message", onMessage);
        resolve(message);
      };
      this.child.on("message", onMessage);
      if (!this.child.send({ probe: kind }))
        reject(new Error("the gateway's probe channel is closed"));
    });
  }

  /** Resident set size from /proc/<pid>/status, in MB. */
  rssMb(): number {
    return processRssMb(this.pid);
  }

  /** CPU time the gateway has used so far, in ms. */
  cpuMs(): number {
    return processCpuMs(this.pid);
  }

  /** The control token the gateway generated into its home. */
  controlToken(): string {
    return readFileSync(join(this.options.home, "control_token"), "utf8").trim();
  }

  output(): string {
    try {
      return readFileSync(this.options.outputFile, "utf8").slice(-4000);
    } catch {
      return "";
    }
  }

  signal(name: NodeJS.Signals): void {
    if (!this.exitInfo) this.child.kill(name);
  }

  /**
   * SIGTERM, then SIGKILL if the gateway has not exited within `graceMs`: a profile or a trace
   * the flags asked for is written on the way out.
   */
  async stop(graceMs = 10_000): Promise<ExitInfo> {
    this.signal("SIGTERM");
    const timer = setTimeout(() => this.signal("SIGKILL"), graceMs);
    try {
      return await this.exited;
    } finally {
      this.http.close();
      clearTimeout(timer);
    }
  }

  /** SIGKILLs if still running and waits for the exit. Safe to call twice. */
  async kill(): Promise<ExitInfo> {
    this.http.close();
    if (!this.exitInfo) this.child.kill("SIGKILL");
    return this.exited;
  }
}
