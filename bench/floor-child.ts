/**
 * A floor forwarder as a child process: bench/floor-server.ts (the `openai` SDK, run by tsx), or
 * with `bare` bench/bare-floor-server.mjs (plain node:http, run by plain node).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { withMallocTunables } from "../src/lib/malloc-tunables.js";
import { REPO_ROOT } from "../test/helpers/gateway-process.js";
import { processRssMb } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";

export class FloorChild {
  readonly baseUrl: string;
  private readonly child: ChildProcess;
  private readonly http: HttpClient;

  constructor(port: number, modelBaseUrl: string, bare = false) {
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.http = new HttpClient(this.baseUrl);
    const script = bare
      ? [join(REPO_ROOT, "bench", "bare-floor-server.mjs")]
      : ["--import", "tsx", join(REPO_ROOT, "bench", "floor-server.ts")];
    this.child = spawn(
      process.execPath,
      [...script, String(port), modelBaseUrl],
      // Given the gateway's malloc settings too: the two are compared as equals.
      {
        cwd: REPO_ROOT,
        stdio: ["ignore", "ignore", "inherit"],
        env: withMallocTunables(process.env),
      },
    );
  }

  async waitReady(timeoutMs = 20_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if ((await this.http.getStatus("/readyz").catch(() => 0)) === 200) return;
      await sleep(20);
    }
    throw new Error("the floor forwarder did not start");
  }

  rssMb(): number {
    return processRssMb(this.child.pid!);
  }

  kill(): void {
    this.http.close();
    this.child.kill("SIGKILL");
  }
}
