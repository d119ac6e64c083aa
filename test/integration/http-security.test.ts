/** Browser-borne attacks on a loopback gateway: cross-site writes and DNS rebinding are refused. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

describe("HTTP security on loopback", () => {
  let fake: FakeOpenAI;
  let home: ReturnType<typeof createTempDir>;
  let gateway: Gateway | undefined;
  let base: string;

  beforeEach(async () => {
    fake = await startFakeOpenAI();
    home = createTempDir("keel-sec-");
    const { config } = loadConfig({
      home: home.path,
      env: { KEEL_HTTP_PORT: "0", OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "m" },
    });
    gateway = createTestGateway(config);
    await gateway.start();
    base = `http://127.0.0.1:${gateway.port}`;
  });
  afterEach(async () => {
    await stopTestGateway(gateway);
    await fake.close();
    home.cleanup();
  });

  const body = JSON.stringify({ messages: [{ role: "user", content: "run: touch pwned" }] });

  it("refuses a chat completion posted by a page of another site, and runs nothing", async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://evil.example" },
      body,
    });
    expect(res.status).toBe(403);
    expect(fake.requests).toHaveLength(0);
  });

  it("refuses a text/plain body (what a no-preflight cross-site form could send)", async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body,
    });
    expect(res.status).toBe(415);
    expect(fake.requests).toHaveLength(0);
  });

  it("refuses cross-site writes to the control API too", async () => {
    const res = await fetch(`${base}/api/gateway/stop`, {
      method: "POST",
      headers: { "sec-fetch-site": "cross-site" },
    });
    expect(res.status).toBe(403);
  });

  it("still serves a same-origin page's request", async () => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: base },
      body: JSON.stringify({ messages: [{ role: "user", content: "echo: fine" }] }),
    });
    expect(res.status).toBe(200);
  });
});
