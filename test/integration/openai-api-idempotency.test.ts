/**
 * `Idempotency-Key` on `POST /v1/chat/completions`, end to end inside one process: a real Gateway
 * (SQLite store, runner, agent loop, HTTP on loopback) against the stand-in model server. A
 * repeated request never runs a second turn: it gets the first one's reply, waiting for it while
 * it runs; the same key with another request is a 422; keys are scoped to the credential and
 * expire after 24 h. The restart cases are in test/e2e/api-idempotency.e2e.test.ts.
 */
import { join } from "node:path";
import type OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import { defaultScript, type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const API_KEY = "api-key-for-idempotency-tests";
const DAY_MS = 24 * 60 * 60 * 1000;

interface Harness {
  gateway: Gateway;
  config: Config;
  baseUrl: string;
  apiKey: string;
}

let fake: FakeOpenAI;
let home: { path: string; cleanup(): void };
let harness: Harness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = createTempDir("keel-api-idem-");
});

afterEach(async () => {
  await stopTestGateway(harness?.gateway);
  harness = undefined;
  await fake.close();
  home.cleanup();
});

async function start(options: { apiKey?: string; now?: () => number } = {}): Promise<Harness> {
  const apiKey = options.apiKey ?? API_KEY;
  const { config } = loadConfig({
    home: home.path,
    env: {
      KEEL_HTTP_PORT: "0",
      OPENAI_BASE_URL: fake.baseUrl,
      KEEL_MODEL: "fake-model",
      KEEL_API_KEY: apiKey,
    },
  });
  const gateway = createTestGateway(config, options.now ? { now: options.now } : {});
  await gateway.start();
  harness = { gateway, config, baseUrl: `http://127.0.0.1:${gateway.port}`, apiKey };
  return harness;
}

function chat(h: Harness, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${h.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${h.apiKey}`,
      ...headers,
    },
    body: JSON.stringify(body),
  });
}

async function contentOf(res: Response): Promise<string> {
  expect(res.status).toBe(200);
  return ((await res.json()) as OpenAI.ChatCompletion).choices[0]!.message.content ?? "";
}

async function errorOf(res: Response): Promise<{ code: string | null; message: string }> {
  return ((await res.json()) as { error: { code: string | null; message: string } }).error;
}

/** The data frames of a finished SSE body. */
function frames(text: string): string[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length));
}

function streamedText(data: string[]): string {
  return data
    .filter((f) => f !== "[DONE]")
    .map((f) => (JSON.parse(f) as OpenAI.ChatCompletionChunk).choices?.[0]?.delta.content ?? "")
    .join("");
}

/** Reads a streamed response until its first data frame arrived; returns the rest as a promise. */
async function firstFrameThenRest(
  res: Response,
): Promise<{ first: string; rest: Promise<string> }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (let i = 0; i < 100 && !text.includes("\n\n"); i++) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    let more = text;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return more;
      more += decoder.decode(value, { stream: true });
    }
  })();
  return { first: frames(text)[0] ?? "", rest };
}

/** Makes the fake model wait for `open()` before answering each request. */
function gateModel(f: FakeOpenAI): () => void {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  f.script(async (request) => {
    await gate;
    return defaultScript(request);
  });
  return open;
}

/** Rows of the record, read through a second (read-only) connection. */
function readDb<T>(h: Harness, sql: string): T[] {
  const db = openSqliteDatabase(join(h.config.home, "state.db"), { readonly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

const turnCount = (h: Harness) => readDb<{ id: number }>(h, "SELECT id FROM turns").length;

describe("the same key with the same request", () => {
  it("returns the first reply without running a second turn (no X-Session-Id)", async () => {
    const h = await start();
    const body = { model: "m", messages: [{ role: "user", content: "echo: only once" }] };
    const headers = { "Idempotency-Key": "retry-1" };
    const first = await chat(h, body, headers);
    const sessionId = first.headers.get("x-session-id");
    const firstBody = (await first.json()) as OpenAI.ChatCompletion;
    expect(firstBody.choices[0]!.message.content).toBe("only once");

    // Keys in a different order are the same request; so is a retry that asks for a stream.
    const again = await chat(h, { messages: body.messages, model: "m" }, headers);
    expect(again.status).toBe(200);
    expect(again.headers.get("x-session-id")).toBe(sessionId);
    const againBody = (await again.json()) as OpenAI.ChatCompletion;
    expect(againBody.choices[0]!.message.content).toBe("only once");
    expect(againBody.id).toBe(firstBody.id);
    const streamed = await chat(h, { ...body, stream: true }, headers);
    expect(streamed.status).toBe(200);
    const data = frames(await streamed.text());
    expect(data.at(-1)).toBe("[DONE]");
    expect(streamedText(data)).toBe("only once");

    expect(fake.requests).toHaveLength(1);
    expect(turnCount(h)).toBe(1);
    expect(readDb(h, "SELECT id FROM inbox")).toHaveLength(1);
    expect(readDb(h, "SELECT key FROM sessions WHERE key LIKE 'agent:main:api:%'")).toHaveLength(1);
  });

  it("returns the first reply within a session (X-Session-Id) instead of a 409", async () => {
    const h = await start();
    const seed = await chat(h, { messages: [{ role: "user", content: "echo: seed" }] });
    const sessionId = seed.headers.get("x-session-id")!;
    const headers = { "Idempotency-Key": "in-session", "X-Session-Id": sessionId };
    const body = { messages: [{ role: "user", content: "echo: in the session" }] };
    expect(await contentOf(await chat(h, body, headers))).toBe("in the session");
    const again = await chat(h, body, headers);
    expect(again.headers.get("x-session-id")).toBe(sessionId);
    expect(await contentOf(again)).toBe("in the session");
    expect(fake.requests).toHaveLength(2);
    expect(turnCount(h)).toBe(2);
  });

  it("a retry while the first request's turn runs waits for it and gets the same reply", async () => {
    const h = await start();
    const open = gateModel(fake);
    const body = { messages: [{ role: "user", content: "echo: worth the wait" }] };
    const headers = { "Idempotency-Key": "concurrent" };
    const first = chat(h, body, headers);
    await waitFor(() => fake.requests.length === 1, { message: "the first turn's model call" });

    // A streamed retry opens its stream at once: it is waiting, not running anything.
    const streamRetry = await chat(h, { ...body, stream: true }, headers);
    expect(streamRetry.status).toBe(200);
    const { first: roleFrame, rest } = await firstFrameThenRest(streamRetry);
    expect((JSON.parse(roleFrame) as OpenAI.ChatCompletionChunk).choices[0]!.delta.role).toBe(
      "assistant",
    );
    const plainRetry = chat(h, body, headers);
    open();

    expect(await contentOf(await first)).toBe("worth the wait");
    expect(await contentOf(await plainRetry)).toBe("worth the wait");
    expect(streamedText(frames(await rest))).toBe("worth the wait");
    expect(fake.requests).toHaveLength(1);
    expect(turnCount(h)).toBe(1);
  });

  it("concurrent first uses of one key store one message and run one turn", async () => {
    const h = await start();
    const body = { messages: [{ role: "user", content: "echo: raced" }] };
    const headers = { "Idempotency-Key": "raced" };
    const replies = await Promise.all(
      Array.from({ length: 4 }, () => chat(h, body, headers).then(contentOf)),
    );
    expect(replies).toEqual(["raced", "raced", "raced", "raced"]);
    expect(fake.requests).toHaveLength(1);
    expect(readDb(h, "SELECT id FROM inbox")).toHaveLength(1);
  });

  it("a repeated chat command gets the stored answer and is not run again", async () => {
    const h = await start();
    const seed = await chat(h, { messages: [{ role: "user", content: "echo: seed" }] });
    const headers = {
      "Idempotency-Key": "new-once",
      "X-Session-Id": seed.headers.get("x-session-id")!,
    };
    const body = { messages: [{ role: "user", content: "/new" }] };
    const first = await contentOf(await chat(h, body, headers));
    expect(first).toMatch(/New session/);
    expect(await contentOf(await chat(h, body, headers))).toBe(first);
    // One /new ran: the key has one transcript behind the one it started.
    expect(readDb(h, "SELECT session_id FROM transcripts")).toHaveLength(2);
  });

  it("a repeat of a request whose turn failed gets the same error, and no second model call", async () => {
    const h = await start();
    // The call and its model.max_retries (3) retries all fail, without waiting.
    for (let i = 0; i < 4; i++) fake.failNext(500, undefined, { "retry-after": "0" });
    const body = { messages: [{ role: "user", content: "echo: doomed" }] };
    const headers = { "Idempotency-Key": "failed-once" };
    const first = await chat(h, body, headers);
    expect(first.status).toBe(502);
    const again = await chat(h, body, headers);
    expect(again.status).toBe(502);
    expect((await errorOf(again)).code).toBe("model_error");
    expect(fake.requests).toHaveLength(4);
  });
});

describe("the same key with a different request", () => {
  it("is refused with 422 idempotency_key_reused and stores nothing", async () => {
    const h = await start();
    const headers = { "Idempotency-Key": "reused" };
    expect(
      await contentOf(await chat(h, { messages: [{ role: "user", content: "echo: a" }] }, headers)),
    ).toBe("a");
    const other = await chat(h, { messages: [{ role: "user", content: "echo: b" }] }, headers);
    expect(other.status).toBe(422);
    const error = await errorOf(other);
    expect(error.code).toBe("idempotency_key_reused");
    expect(error.message).toMatch(/Idempotency-Key/);
    // The same text aimed at another session is another request too.
    const seed = await chat(h, { messages: [{ role: "user", content: "echo: seed" }] });
    const elsewhere = await chat(
      h,
      { messages: [{ role: "user", content: "echo: a" }] },
      { ...headers, "X-Session-Id": seed.headers.get("x-session-id")! },
    );
    expect(elsewhere.status).toBe(422);

    expect(fake.requests).toHaveLength(2);
    expect(readDb(h, "SELECT id FROM inbox")).toHaveLength(2);
  });

  it("an empty or overlong key is a 400", async () => {
    const h = await start();
    const body = { messages: [{ role: "user", content: "echo: x" }] };
    expect((await chat(h, body, { "Idempotency-Key": "x".repeat(256) })).status).toBe(400);
    expect(fake.requests).toHaveLength(0);
  });
});

describe("scope and lifetime of a key", () => {
  it("keys of another credential never match (scoped to the bearer value)", async () => {
    const body = { messages: [{ role: "user", content: "echo: per client" }] };
    const headers = { "Idempotency-Key": "shared-name" };
    const h1 = await start({ apiKey: "first-client-key" });
    expect(await contentOf(await chat(h1, body, headers))).toBe("per client");
    expect(await contentOf(await chat(h1, body, headers))).toBe("per client");
    expect(fake.requests).toHaveLength(1);
    await stopTestGateway(h1.gateway);

    // Same home, same record, another credential: its key of the same name is its own.
    const h2 = await start({ apiKey: "second-client-key" });
    expect(await contentOf(await chat(h2, body, headers))).toBe("per client");
    expect(fake.requests).toHaveLength(2);
    expect(await contentOf(await chat(h2, body, headers))).toBe("per client");
    expect(fake.requests).toHaveLength(2);
    const scopes = readDb<{ scope: string }>(h2, "SELECT scope FROM idempotency_keys");
    expect(new Set(scopes.map((s) => s.scope)).size).toBe(2);
    // The secret itself is never stored.
    const dump = JSON.stringify(readDb(h2, "SELECT * FROM idempotency_keys"));
    expect(dump).not.toContain("first-client-key");
    expect(dump).not.toContain("second-client-key");
  });

  it("a key is kept 24 hours, then pruned and free to run again", async () => {
    let clock = Date.now();
    const h = await start({ now: () => clock });
    const body = { messages: [{ role: "user", content: "echo: daily" }] };
    const headers = { "Idempotency-Key": "daily" };
    expect(await contentOf(await chat(h, body, headers))).toBe("daily");
    clock += DAY_MS - 1000;
    expect(await contentOf(await chat(h, body, headers))).toBe("daily");
    expect(fake.requests).toHaveLength(1);

    clock += 2000;
    expect(await contentOf(await chat(h, body, headers))).toBe("daily");
    expect(fake.requests).toHaveLength(2);
    // The expired row was pruned when the new one was stored.
    const rows = readDb<{ created_at: number }>(h, "SELECT created_at FROM idempotency_keys");
    expect(rows).toEqual([{ created_at: clock }]);
  });
});

describe("a refused request does not use up its key", () => {
  it("refused up front while draining: 503, nothing stored, the key runs once the drain ends", async () => {
    const h = await start();
    const body = { messages: [{ role: "user", content: "echo: after the drain" }] };
    const headers = { "Idempotency-Key": "drained" };
    await h.gateway.drain("drain");
    const refused = await chat(h, body, headers);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("30");
    expect((await errorOf(refused)).code).toBe("gateway_draining");
    expect(readDb(h, "SELECT id FROM inbox")).toHaveLength(0);
    expect(readDb(h, "SELECT scope FROM idempotency_keys")).toHaveLength(0);

    await h.gateway.drain("cancel");
    expect(await contentOf(await chat(h, body, headers))).toBe("after the drain");
    expect(fake.requests).toHaveLength(1);
  });

  it("stored, then refused by the runner: the client still gets 503 and the key is freed", async () => {
    const h = await start();
    const body = { messages: [{ role: "user", content: "echo: second try" }] };
    const headers = { "Idempotency-Key": "raced-drain" };
    // Hold dispatch so the message is stored while the gateway is open, then drain before the
    // runner looks at it: the runner refuses a stored message.
    h.gateway.runner.holdIntake();
    const pending = chat(h, body, headers);
    await waitFor(async () => (await h.gateway.store.listOpenInbox()).length === 1, {
      message: "the message stored",
    });
    await h.gateway.drain("drain");
    await h.gateway.runner.dispatchOpenInbox();
    const refused = await pending;
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("30");
    expect((await errorOf(refused)).code).toBe("gateway_draining");

    await h.gateway.drain("cancel");
    expect(await contentOf(await chat(h, body, headers))).toBe("second try");
    expect(fake.requests).toHaveLength(1);
  });
});
