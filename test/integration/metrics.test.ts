/**
 * `GET /metrics` of a real gateway in this process, against the stand-in model: who may read it
 * (the control token, `metrics.token` — which opens nothing else), and that a turn with a tool
 * call moves the counters and histograms fed from the runner, the model chain and the store.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { sampleValue } from "../helpers/prometheus-text.js";
import { createTempDir } from "../helpers/temp-home.js";

const METRICS_TOKEN = "metrics-token-of-the-scraper";

let fake: FakeOpenAI;
let home: { path: string; cleanup(): void };
let gateway: Gateway | undefined;
let baseUrl: string;
let controlToken: string;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = createTempDir("keel-metrics-it-");
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
  baseUrl = `http://127.0.0.1:${gateway.port}`;
});

afterEach(async () => {
  await stopTestGateway(gateway);
  gateway = undefined;
  await fake.close();
  home.cleanup();
});

const get = (path: string, token?: string) =>
  fetch(`${baseUrl}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});

async function scrape(): Promise<string> {
  const res = await get("/metrics", METRICS_TOKEN);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

describe("GET /metrics", () => {
  it("needs the control token or metrics.token, and metrics.token opens nothing else", async () => {
    expect((await get("/metrics")).status).toBe(401);
    expect((await get("/metrics", "not-the-token-at-all")).status).toBe(401);
    expect((await get("/metrics", METRICS_TOKEN)).status).toBe(200);
    expect((await get("/metrics", controlToken)).status).toBe(200);
    expect((await get("/api/status", METRICS_TOKEN)).status).toBe(401);
    expect((await get("/api/sessions", METRICS_TOKEN)).status).toBe(401);
    const v1 = await fetch(`${baseUrl}/v1/models`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(v1.status).toBe(401);
  });

  it("counts a turn with a tool call: turns, durations, model calls and tokens, tools, commits", async () => {
    const before = await scrape();
    expect(sampleValue(before, "keel_turns_total", { platform: "api" })).toBeUndefined();
    const res = await fetch(`${baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${controlToken}` },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "run: echo hi" }] }),
    });
    expect(res.status).toBe(200);
    expect(
      ((await res.json()) as { choices: [{ message: { content: string } }] }).choices[0].message
        .content,
    ).toBe("ran: hi");
    const text = await scrape();
    expect(sampleValue(text, "keel_turns_total", { platform: "api", outcome: "stop" })).toBe(1);
    expect(sampleValue(text, "keel_turn_duration_seconds_count", { platform: "api" })).toBe(1);
    expect(sampleValue(text, "keel_tool_calls_total", { tool: "terminal", outcome: "ok" })).toBe(1);
    expect(
      sampleValue(text, "keel_model_request_duration_seconds_count", {
        model: "fake-model",
        outcome: "ok",
      }),
    ).toBe(2);
    expect(
      sampleValue(text, "keel_model_tokens_total", { model: "fake-model", direction: "input" }),
    ).toBeGreaterThan(0);
    expect(
      sampleValue(text, "keel_model_tokens_total", { model: "fake-model", direction: "output" }),
    ).toBeGreaterThan(0);
    expect(sampleValue(text, "keel_store_commit_duration_seconds_count")).toBeGreaterThan(
      sampleValue(before, "keel_store_commit_duration_seconds_count") ?? 0,
    );
    expect(sampleValue(text, "keel_resumed_turns_total")).toBe(0);
    expect(sampleValue(text, "keel_inbox_pending")).toBe(0);
    expect(sampleValue(text, "keel_outbox_pending")).toBe(0);
    expect(sampleValue(text, "keel_outbox_oldest_age_seconds")).toBe(0);
    expect(sampleValue(text, "keel_approvals_pending")).toBe(0);
    expect(sampleValue(text, "keel_tasks_running")).toBe(0);
    expect(sampleValue(text, "keel_platform_connected", { platform: "api" })).toBe(1);
    // The process and event-loop defaults.
    expect(sampleValue(text, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(sampleValue(text, "nodejs_eventloop_lag_p99_seconds")).toBeGreaterThanOrEqual(0);
    // No chat, user or session id in any label.
    expect(text).not.toMatch(/agent:main|chatcmpl|session/);
  });
});
