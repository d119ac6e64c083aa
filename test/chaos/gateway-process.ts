/**
 * The real gateway as a child process (`node bin/keel.js gateway run --home <dir>`), for the
 * chaos harness and the crash-recovery tests: start it, wait until it reports `running`, kill it
 * with SIGKILL, or let a crash point kill it. Needs a build (`npm run build`).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const ENTRY = join(REPO_ROOT, "bin", "keel.js");

/** True when the compiled CLI exists (the tests skip or build otherwise). */
export function isBuilt(): boolean {
  return existsSync(join(REPO_ROOT, "dist", "main.js"));
}

export interface GatewayProcessOptions {
  home: string;
  /** Environment of the gateway (nothing is inherited except PATH). */
  env: Record<string, string>;
  /** KEEL_CRASH_POINT for this run (`name` or `name:N`). */
  crashPoint?: string;
  /** The child's stdout and stderr are appended here. */
  outputFile: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class GatewayProcess {
  readonly exited: Promise<ExitInfo>;
  private exitInfo: ExitInfo | null = null;

  private constructor(
    private readonly child: ChildProcess,
    private readonly home: string,
  ) {
    this.exited = new Promise((resolve) => {
      child.once("exit", (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
  }

  /** Spawns the gateway; does not wait for it (see {@link waitReady}). */
  static spawn(options: GatewayProcessOptions): GatewayProcess {
    const out = openSync(options.outputFile, "a");
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      ...options.env,
    };
    if (options.crashPoint) env.KEEL_CRASH_POINT = options.crashPoint;
    const child = spawn(process.execPath, [ENTRY, "gateway", "run", "--home", options.home], {
      env,
      stdio: ["ignore", out, out],
    });
    closeSync(out);
    return new GatewayProcess(child, options.home);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** The exit, once the process has ended. */
  get exit(): ExitInfo | null {
    return this.exitInfo;
  }

  /**
   * Resolves true once this process reports `running` in `gateway_state.json`, false if it exits
   * first (a crash point during start-up) or `timeoutMs` passes.
   */
  async waitReady(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.exitInfo) return false;
      if (this.reportsRunning()) return true;
      await sleep(25);
    }
    return false;
  }

  private reportsRunning(): boolean {
    try {
      const status = JSON.parse(readFileSync(join(this.home, "gateway_state.json"), "utf8")) as {
        pid?: number;
        gateway_state?: string;
      };
      return status.pid === this.pid && status.gateway_state === "running";
    } catch {
      return false;
    }
  }

  /** SIGKILL, then waits for the exit. */
  async kill(): Promise<ExitInfo> {
    if (!this.exitInfo) this.child.kill("SIGKILL");
    return this.exited;
  }

  /** SIGTERM (a stop), then SIGKILL if it has not exited after `timeoutMs`. */
  async stop(timeoutMs = 15_000): Promise<ExitInfo> {
    if (this.exitInfo) return this.exitInfo;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), timeoutMs);
    const info = await this.exited;
    clearTimeout(timer);
    return info;
  }

  /**
   * Waits up to `timeoutMs` for the process to die by itself (a crash point); true if it did.
   */
  async waitExit(timeoutMs: number): Promise<boolean> {
    if (this.exitInfo) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), timeoutMs);
    });
    const info = await Promise.race([this.exited, timeout]);
    clearTimeout(timer);
    return info !== null;
  }
}
