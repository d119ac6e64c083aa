import { type Context, Hono } from "hono";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { rawRequest } from "../../test/helpers/raw-http.js";
import { Access } from "./access.js";
import type { AppEnv } from "./access-gate.js";
import { AuthFailures } from "./auth-failures.js";
import { HttpServer } from "./http-server.js";
import { readJson } from "./node-request.js";
import { WebSessions } from "./web-session.js";

let server: HttpServer | undefined;

afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/**
 * Whether @hono/node-server has built the full web Request around Node's request (its private
 * cache, found by the symbol's description; the control route below proves the probe sees it).
 */
function webRequestBuilt(raw: Request): boolean {
  const cache = Object.getOwnPropertySymbols(raw).find((s) => s.description === "requestCache");
  return cache !== undefined && (raw as unknown as Record<symbol, unknown>)[cache] !== undefined;
}

/** The real listener with a 1 KiB body cap, trusting loopback, and two probe routes. */
async function serveProbe(): Promise<number> {
  const probe = new Hono<AppEnv>();
  const answer = async (c: Context<AppEnv>) => {
    const built = webRequestBuilt(c.req.raw);
    return c.json({ built, got: await readJson(c) });
  };
  probe.post("/v1/probe", answer);
  // Control: a route that asks for the web Request's body itself.
  probe.post("/v1/touch", (c) => (c.req.raw.body ? answer(c) : c.json({ built: false })));
  server = new HttpServer({
    host: "127.0.0.1",
    port: 0,
    publicHosts: [],
    access: new Access({
      controlToken: "t".repeat(32),
      apiKey: undefined,
      trustLoopback: true,
      failures: new AuthFailures(),
      sessions: new WebSessions("t".repeat(32)),
    }),
    maxBodyBytes: 1024,
    logger: pino({ level: "silent" }),
    routes: [probe],
  });
  return server.start();
}

/** A raw POST of JSON: with `chunked`, the body goes without a Content-Length. */
async function post(port: number, body: string, chunked: boolean, path = "/v1/probe") {
  const answer = await rawRequest(port, {
    method: "POST",
    path,
    headers: { "content-type": "application/json" },
    body,
    chunked,
  });
  return { status: answer.status, json: JSON.parse(answer.body) as unknown };
}

describe("HttpServer body limit", () => {
  it("judges a declared length from Node's request, without building a web Request", async () => {
    const port = await serveProbe();
    const small = JSON.stringify({ text: "hello" });
    expect(await post(port, small, false)).toEqual({
      status: 200,
      json: { built: false, got: { text: "hello" } },
    });
    expect(await post(port, small, false, "/v1/touch")).toEqual({
      status: 200,
      json: { built: true, got: { text: "hello" } },
    });
    const large = JSON.stringify({ text: "x".repeat(2000) });
    expect(await post(port, large, false)).toMatchObject({
      status: 413,
      // A /v1 path: OpenAI's error shape, the gateway's code lower-cased.
      json: { error: { code: "body_too_large", type: "invalid_request_error" } },
    });
    // A chunked body has no length to judge: it is counted as it is read, and capped the same.
    expect(await post(port, small, true)).toMatchObject({
      status: 200,
      json: { got: { text: "hello" } },
    });
    expect(await post(port, large, true)).toMatchObject({
      status: 413,
      // A /v1 path: OpenAI's error shape, the gateway's code lower-cased.
      json: { error: { code: "body_too_large", type: "invalid_request_error" } },
    });
  });
});
