/** The floor forwarder (bench/floor-server.ts) as a child process. */
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

  constructor(port: number, modelBaseUrl: string) {
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.http = new HttpClient(this.baseUrl);
    this.child = spawn(
      process.execPath,
      ["--import", "tsx", join(REPO_ROOT, "bench", "floor-server.ts"), String(port), modelBaseUrl],
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
