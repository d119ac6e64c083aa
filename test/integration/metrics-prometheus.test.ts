/**
 * A real Prometheus (Debian's `prometheus` package; .ci/run installs it) scrapes a running
 * gateway with `metrics.token`, the way docs/operations.md "Monitoring" configures it, and a
 * PromQL query over its HTTP API returns the turn the gateway just ran.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const METRICS_TOKEN = "metrics-token-of-the-prometheus-test";

function hasPrometheus(): boolean {
  try {
    execFileSync("prometheus", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

// CI installs the package (.ci/run); a machine without it says so instead of failing.
describe.skipIf(!hasPrometheus())(
  "a real Prometheus scraping /metrics (needs `prometheus`)",
  () => {
    let fake: FakeOpenAI;
    let home: { path: string; cleanup(): void };
    let gateway: Gateway | undefined;
    let prometheus: ChildProcess | undefined;
    let promUrl: string;
    let controlToken: string;
    let gatewayUrl: string;
    let promLog = "";

    beforeAll(async () => {
      fake = await startFakeOpenAI();
      home = createTempDir("keel-prometheus-it-");
      const { config } = loadConfig({
        home: home.path,
        env: {
          KEEL_HTTP_PORT: "0",
          OPENAI_BASE_URL: fake.baseUrl,
          KEEL_MODEL: "fake-model",
          KEEL_METRICS_TOKEN: METRICS_TOKEN,
          KEEL_WEBCHAT_ENABLED: "false",
        },
      });
      controlToken = config.controlToken;
      gateway = createTestGateway(config);
      await gateway.start();
      gatewayUrl = `http://127.0.0.1:${gateway.port}`;
      const promPort = await freePort();
      promUrl = `http://127.0.0.1:${promPort}`;
      const configFile = join(home.path, "prometheus.yml");
      writeFileSync(
        configFile,
        [
          "global:",
          "  scrape_interval: 1s",
          "scrape_configs:",
          "  - job_name: keel",
          "    authorization:",
          `      credentials: ${METRICS_TOKEN}`,
          "    static_configs:",
          `      - targets: ["127.0.0.1:${gateway.port}"]`,
          "",
        ].join("\n"),
      );
      prometheus = spawn(
        "prometheus",
        [
          `--config.file=${configFile}`,
          `--storage.tsdb.path=${join(home.path, "tsdb")}`,
          `--web.listen-address=127.0.0.1:${promPort}`,
        ],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      prometheus.stderr?.on("data", (chunk: Buffer) => {
        promLog = (promLog + chunk.toString()).slice(-4000);
      });
      await waitFor(async () => (await fetch(`${promUrl}/-/ready`)).ok, {
        timeoutMs: 30_000,
        intervalMs: 200,
        message: "prometheus ready",
      }).catch((err: Error) => {
        throw new Error(`${err.message}\n${promLog}`);
      });
    });

    afterAll(async () => {
      if (prometheus && prometheus.exitCode === null) {
        const exited = new Promise((resolve) => prometheus!.once("exit", resolve));
        prometheus.kill("SIGTERM");
        await exited;
      }
      await stopTestGateway(gateway);
      await fake.close();
      home.cleanup();
    });

    async function query(
      promql: string,
    ): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>> {
      const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.json()) as { status: string; data: { result: never[] } };
      expect(body.status).toBe("success");
      return body.data.result;
    }

    it("scrapes with the token, and PromQL returns the turn count", async () => {
      const res = await fetch(`${gatewayUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${controlToken}` },
        body: JSON.stringify({
          model: "m",
          messages: [{ role: "user", content: "echo: scraped" }],
        }),
      });
      expect(res.status).toBe(200);
      const turns = await waitFor(
        async () => {
          const result = await query('sum(keel_turns_total{job="keel",platform="api"})');
          return result.length === 1 && result[0]!.value[1] === "1" ? result : null;
        },
        { timeoutMs: 30_000, intervalMs: 250, message: "Prometheus sees the turn" },
      );
      expect(turns[0]!.value[1]).toBe("1");
      const up = await query('up{job="keel"}');
      expect(up[0]!.value[1]).toBe("1");
    });
  },
);
