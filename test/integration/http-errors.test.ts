/**
 * Every HTTP error of the catalogue (docs/http-errors.md) as a client receives it: the exact
 * status, body bytes and headers, for the gateway's own routes and for the `/v1` API.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { type RawAnswer, rawRequest } from "../helpers/raw-http.js";
import { createTempDir } from "../helpers/temp-home.js";

let dir: ReturnType<typeof createTempDir>;
let gw: InProcessGateway;
let port: number;

beforeAll(async () => {
  dir = createTempDir();
  writeFileSync(join(dir.path, "config.yaml"), "http:\n  max_body_bytes: 1024\n", { mode: 0o600 });
  gw = await startInProcessGateway({ home: dir.path, env: { KEEL_API_ENABLED: "true" } });
  port = Number(new URL(gw.url).port);
});
afterAll(async () => {
  await gw.shutdown();
  dir.cleanup();
});

function send(
  method: string,
  path: string,
  options: { body?: string; headers?: Record<string, string>; token?: boolean } = {},
): Promise<RawAnswer> {
  return rawRequest(port, {
    method,
    path,
    headers: {
      ...(options.token !== false && { authorization: `Bearer ${gw.controlToken}` }),
      ...(options.body !== undefined && { "content-type": "application/json" }),
      ...options.headers,
    },
    ...(options.body !== undefined && { body: options.body }),
  });
}

const control = (code: string, message: string) => JSON.stringify({ error: { code, message } });
const openAi = (message: string, type: string, code: string | null) =>
  JSON.stringify({ error: { message, type, param: null, code } });

describe("the gateway's own routes", () => {
  it("HOST_REFUSED 421", async () => {
    const res = await send("GET", "/api/status", { headers: { host: "evil.example" } });
    expect([res.status, res.body]).toEqual([
      421,
      control("HOST_REFUSED", "Unrecognized Host header."),
    ]);
  });

  it("CROSS_SITE_REFUSED 403", async () => {
    const res = await send("POST", "/api/gateway/drain", {
      body: '{"action":"drain"}',
      headers: { origin: "https://evil.example", "sec-fetch-site": "cross-site" },
    });
    expect([res.status, res.body]).toEqual([
      403,
      control("CROSS_SITE_REFUSED", "Cross-site requests are refused."),
    ]);
  });

  it("UNAUTHORIZED 401, with the Bearer challenge", async () => {
    const res = await send("GET", "/api/status", { token: false });
    expect([res.status, res.body]).toEqual([
      401,
      control(
        "UNAUTHORIZED",
        "Missing or wrong credential: send Authorization: Bearer <control token>, or open the login link (`keel open`).",
      ),
    ]);
    expect(res.headers["www-authenticate"]).toBe('Bearer realm="keel"');
  });

  it("NOT_FOUND 404 for a route and for a session", async () => {
    const route = await send("GET", "/api/nothing-here");
    expect([route.status, route.body]).toEqual([
      404,
      control("NOT_FOUND", "No route for GET /api/nothing-here."),
    ]);
    const session = await send("GET", "/api/sessions/nope");
    expect([session.status, session.body]).toEqual([
      404,
      control("NOT_FOUND", "No session with id nope."),
    ]);
  });

  it("BAD_JSON and BAD_REQUEST 400", async () => {
    const badJson = await send("POST", "/api/gateway/drain", { body: "{" });
    expect([badJson.status, badJson.body]).toEqual([
      400,
      control("BAD_JSON", "Request body is not valid JSON."),
    ]);
    const bad = await send("POST", "/api/gateway/drain", { body: "{}" });
    expect([bad.status, bad.body]).toEqual([
      400,
      control("BAD_REQUEST", 'Body must be {"action":"drain"} or {"action":"cancel"}.'),
    ]);
  });

  it("BODY_TOO_LARGE 413", async () => {
    const res = await send("POST", "/api/gateway/drain", { body: `"${"x".repeat(2000)}"` });
    expect([res.status, res.body]).toEqual([
      413,
      control(
        "BODY_TOO_LARGE",
        "Request body exceeds 1024 bytes; raise http.max_body_bytes in config.yaml to accept larger ones.",
      ),
    ]);
  });
});

describe("the /v1 API, in OpenAI's shape", () => {
  const completion = JSON.stringify({ messages: [{ role: "user", content: "hi" }] });

  it("invalid_api_key 401", async () => {
    const res = await send("POST", "/v1/chat/completions", { body: completion, token: false });
    expect([res.status, res.body]).toEqual([
      401,
      openAi(
        "Missing API key (Authorization: Bearer <platforms.api.key or control token>).",
        "invalid_request_error",
        "invalid_api_key",
      ),
    ]);
    expect(res.headers["www-authenticate"]).toBe('Bearer realm="keel"');
  });

  it("415 for a body that is not JSON, 400 for bad JSON or a bad request", async () => {
    const form = await send("POST", "/v1/chat/completions", {
      headers: { "content-type": "text/plain" },
      body: "hi",
    });
    expect([form.status, form.body]).toEqual([
      415,
      openAi("Content-Type must be application/json.", "invalid_request_error", null),
    ]);
    const badJson = await send("POST", "/v1/chat/completions", { body: "{" });
    expect([badJson.status, badJson.body]).toEqual([
      400,
      openAi("Request body is not valid JSON.", "invalid_request_error", null),
    ]);
    const lastNotUser = await send("POST", "/v1/chat/completions", {
      body: JSON.stringify({ messages: [{ role: "assistant", content: "x" }] }),
    });
    expect([lastNotUser.status, lastNotUser.body]).toEqual([
      400,
      openAi(
        "The last message must be a non-empty user message, or the results (role tool) of the tool calls of the assistant message before them.",
        "invalid_request_error",
        null,
      ),
    ]);
    const longKey = await send("POST", "/v1/chat/completions", {
      body: completion,
      headers: { "idempotency-key": "k".repeat(300) },
    });
    expect(longKey.status).toBe(400);
    expect(JSON.parse(longKey.body)).toMatchObject({
      error: { type: "invalid_request_error", param: null, code: null },
    });
  });

  it("session_not_found 404", async () => {
    const res = await send("POST", "/v1/chat/completions", {
      body: completion,
      headers: { "x-session-id": "nope" },
    });
    expect([res.status, res.body]).toEqual([
      404,
      openAi("Unknown session id nope.", "invalid_request_error", "session_not_found"),
    ]);
  });

  it("model_not_configured 503 (a refusal), with nothing stored", async () => {
    const res = await send("POST", "/v1/chat/completions", { body: completion });
    expect(res.status).toBe(503);
    expect(JSON.parse(res.body)).toMatchObject({
      error: { type: "server_error", param: null, code: "model_not_configured" },
    });
  });
});

describe("the catalogue in docs/http-errors.md", () => {
  it("lists every code of both catalogues", async () => {
    const { readFileSync } = await import("node:fs");
    const { HTTP_ERRORS } = await import("../../src/control/http-errors.js");
    const { API_ERRORS } = await import("../../src/platforms/openai-api/errors.js");
    const doc = readFileSync(new URL("../../docs/http-errors.md", import.meta.url), "utf8");
    for (const [code, { status }] of Object.entries(HTTP_ERRORS))
      expect(doc, code).toContain(`| \`${code}\` | ${status} |`);
    for (const [name, { status, type }] of Object.entries(API_ERRORS))
      expect(doc, name).toContain(`| \`${name}\` | ${status} | \`${type}\` |`);
  });
});
