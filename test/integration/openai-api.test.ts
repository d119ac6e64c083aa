/**
 * The OpenAI-compatible API end to end inside one process: a real Gateway (SQLite store, runner,
 * agent loop, HTTP server on loopback port 0) against the stand-in model server, driven through
 * the official `openai` client and plain HTTP. Bad input must get a clear error and leave what
 * was stored before intact.
 */
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import type { Config } from "../../src/config/schema.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { openSqliteDatabase } from "../../src/sessions/sqlite-database.js";
import {
  defaultScript,
  type FakeOpenAI,
  fakePromptTokens,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

interface Harness {
  gateway: Gateway;
  config: Config;
  baseUrl: string;
  client: OpenAI;
}

interface StoredSession {
  session: { key: string; session_id: string };
  messages: Array<{ role: string; content: string | null; tool_calls?: unknown[] }>;
}

/** platforms.api.key for the tests that send a credential (every route will need one). */
const KEY = "api-key-of-the-api-tests";
const bearer = () => ({ authorization: `Bearer ${KEY}` });

let fake: FakeOpenAI;
let home: { path: string; cleanup(): void };
let harness: Harness | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = createTempDir("keel-api-it-");
});

afterEach(async () => {
  await stopTestGateway(harness?.gateway);
  harness = undefined;
  await fake.close();
  home.cleanup();
});

/** Starts a gateway on a fresh home; `model: false` leaves the model unconfigured. */
async function start(
  options: { env?: Record<string, string>; yaml?: string; model?: boolean } = {},
): Promise<Harness> {
  if (options.yaml) writeFileSync(join(home.path, "config.yaml"), options.yaml);
  const modelEnv =
    options.model === false ? {} : { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" };
  const { config } = loadConfig({
    home: home.path,
    env: { KEEL_HTTP_PORT: "0", ...modelEnv, ...options.env },
  });
  const gateway = createTestGateway(config);
  await gateway.start();
  const baseUrl = `http://127.0.0.1:${gateway.port}`;
  const client = new OpenAI({
    baseURL: `${baseUrl}/v1`,
    apiKey: options.env?.KEEL_API_KEY ?? config.controlToken,
    maxRetries: 0,
  });
  harness = { gateway, config, baseUrl, client };
  return harness;
}

/** POSTs a completion with the control token unless `headers` names another authorization. */
function chat(h: Harness, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${h.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${h.config.controlToken}`,
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

function control(h: Harness, path: string, token = h.config.controlToken): Promise<Response> {
  return fetch(`${h.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
}

async function transcript(h: Harness, sessionId: string): Promise<StoredSession> {
  const res = await control(h, `/api/sessions/${sessionId}`);
  expect(res.status).toBe(200);
  return (await res.json()) as StoredSession;
}

/** Every session and its transcript, for before/after comparisons. */
async function snapshot(h: Harness): Promise<unknown> {
  const res = await control(h, "/api/sessions");
  const { sessions } = (await res.json()) as { sessions: Array<{ session_id: string }> };
  const transcripts = await Promise.all(sessions.map((s) => transcript(h, s.session_id)));
  return { sessions, transcripts };
}

/** One successful exchange, so there is something stored to protect. Returns its session id. */
async function seedSession(h: Harness): Promise<string> {
  const res = await chat(h, { model: "m", messages: [{ role: "user", content: "echo: kept" }] });
  expect(res.status).toBe(200);
  return res.headers.get("x-session-id")!;
}

function roles(stored: StoredSession): string[] {
  return stored.messages.map((m) => `${m.role}:${m.content ?? ""}`);
}

describe("chat completions through the official client", () => {
  it("answers a non-streamed completion in OpenAI's format", async () => {
    const h = await start();
    const { data, response } = await h.client.chat.completions
      .create({ model: "fake-model", messages: [{ role: "user", content: "echo: hello there" }] })
      .withResponse();
    expect(data.object).toBe("chat.completion");
    expect(data.id).toMatch(/^chatcmpl-/);
    expect(data.choices[0]!.message).toMatchObject({ role: "assistant", content: "hello there" });
    expect(data.choices[0]!.finish_reason).toBe("stop");
    expect(response.headers.get("x-session-id")).toBeTruthy();
  });

  it("answers in the response and records the reply delivered with the turn's end, not through the outbox", async () => {
    const h = await start();
    const res = await chat(h, { messages: [{ role: "user", content: "echo: in band" }] });
    expect(res.status).toBe(200);
    const db = openSqliteDatabase(join(h.config.home, "state.db"), { readonly: true });
    try {
      const rows = db
        .prepare("SELECT kind, text, state, attempts, created_at, delivered_at FROM outbox")
        .all();
      // Stored delivered in the finish's transaction: the outbox never tried to send it.
      expect(rows).toEqual([
        expect.objectContaining({
          kind: "reply",
          text: "in band",
          state: "delivered",
          attempts: 0,
        }),
      ]);
      const [row] = rows as Array<{ created_at: number; delivered_at: number }>;
      expect(row!.delivered_at).toBe(row!.created_at);
    } finally {
      db.close();
    }
  });

  it("streams a completion in OpenAI's chunk format", async () => {
    const h = await start();
    const stream = await h.client.chat.completions.create({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: "echo: streamed words arrive in pieces" }],
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe("streamed words arrive in pieces");
  });

  it("streams raw server-sent events ending with [DONE]", async () => {
    const h = await start();
    const res = await chat(h, { stream: true, messages: [{ role: "user", content: "echo: raw" }] });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const frames = (await res.text())
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice("data: ".length));
    expect(frames.at(-1)).toBe("[DONE]");
    const parsed = frames.slice(0, -1).map((f) => JSON.parse(f) as OpenAI.ChatCompletionChunk);
    expect(parsed.map((c) => c.choices[0]!.delta.content ?? "").join("")).toBe("raw");
  });

  it("reports the turn's real token usage, summed over its model calls, streamed or not", async () => {
    const h = await start();
    const plain = await h.client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "run: echo counted" }],
    });
    // Two model calls (the tool call, then the answer): the fake's own counts, added up.
    const [first, second] = fake.requests.map(fakePromptTokens);
    expect(plain.usage?.prompt_tokens).toBe(first! + second!);
    expect(plain.usage?.completion_tokens).toBeGreaterThan(0);
    expect(plain.usage?.total_tokens).toBe(
      plain.usage!.prompt_tokens + plain.usage!.completion_tokens,
    );

    const stream = await h.client.chat.completions.create({
      model: "m",
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: "user", content: "echo: streamed" }],
    });
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage?.prompt_tokens).toBe(fakePromptTokens(fake.requests.at(-1)!));
  });

  it("lists the configured model", async () => {
    const h = await start();
    const models = await h.client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["fake-model"]);
  });
});

describe("sessions over the API", () => {
  it("continues a session named by X-Session-Id and stores the whole transcript", async () => {
    const h = await start();
    const first = await chat(h, { messages: [{ role: "user", content: "echo: one" }] });
    const sessionId = first.headers.get("x-session-id")!;
    expect(sessionId).toBeTruthy();
    const second = await chat(
      h,
      { messages: [{ role: "user", content: "echo: two" }] },
      { "X-Session-Id": sessionId },
    );
    expect(second.status).toBe(200);
    expect(second.headers.get("x-session-id")).toBe(sessionId);
    const body = (await second.json()) as OpenAI.ChatCompletion;
    expect(body.choices[0]!.message.content).toBe("two");

    expect(roles(await transcript(h, sessionId))).toEqual([
      "user:echo: one",
      "assistant:one",
      "user:echo: two",
      "assistant:two",
    ]);
    // The model saw the earlier exchange on the second call.
    const sent = fake.requests.at(-1)!.messages.filter((m) => m.role !== "system");
    expect(sent.map((m) => m.content)).toEqual(["echo: one", "one", "echo: two"]);
  });

  it("stores a stateless request's messages as a fresh session", async () => {
    const h = await start();
    const res = await chat(h, {
      messages: [
        { role: "user", content: "my name is Ann" },
        { role: "assistant", content: "Hello Ann." },
        { role: "user", content: "echo: noted" },
      ],
    });
    expect(res.status).toBe(200);
    const sessionId = res.headers.get("x-session-id")!;
    expect(roles(await transcript(h, sessionId))).toEqual([
      "user:my name is Ann",
      "assistant:Hello Ann.",
      "user:echo: noted",
      "assistant:noted",
    ]);
    const sent = fake.requests.at(-1)!.messages.filter((m) => m.role !== "system");
    expect(sent.map((m) => m.content)).toEqual(["my name is Ann", "Hello Ann.", "echo: noted"]);

    // A second stateless request is another session, not a continuation.
    const other = await chat(h, { messages: [{ role: "user", content: "echo: alone" }] });
    expect(other.headers.get("x-session-id")).not.toBe(sessionId);
  });

  it("with X-Session-Id, only the last message is new input", async () => {
    const h = await start();
    const sessionId = await seedSession(h);
    const res = await chat(
      h,
      {
        messages: [
          { role: "user", content: "not stored again" },
          { role: "assistant", content: "nor this" },
          { role: "user", content: "echo: only this" },
        ],
      },
      { "X-Session-Id": sessionId },
    );
    expect(res.status).toBe(200);
    expect(roles(await transcript(h, sessionId))).toEqual([
      "user:echo: kept",
      "assistant:kept",
      "user:echo: only this",
      "assistant:only this",
    ]);
  });

  it("a repeated Idempotency-Key gets the stored reply and the message is stored once", async () => {
    const h = await start({ env: { KEEL_API_KEY: KEY } });
    const headers = { "Idempotency-Key": "req-1", ...bearer() };
    const body = { messages: [{ role: "user", content: "echo: once" }] };
    const first = await chat(h, body, headers);
    const sessionId = first.headers.get("x-session-id")!;
    const again = await chat(h, body, headers);
    expect(again.status).toBe(200);
    expect(again.headers.get("x-session-id")).toBe(sessionId);
    expect(((await again.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe(
      "once",
    );
    expect(roles(await transcript(h, sessionId))).toEqual(["user:echo: once", "assistant:once"]);
    expect(fake.requests).toHaveLength(1);
  });

  it("streams the reply of a tool-using turn", async () => {
    const h = await start();
    const stream = await h.client.chat.completions.create({
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "run: echo streamed-tool" }],
    });
    let text = "";
    for await (const chunk of stream) {
      // Without X-Keel-Tool-Events a client gets OpenAI's chunks only.
      expect(chunk).not.toHaveProperty("keel_tool");
      expect(chunk.choices).toHaveLength(1);
      text += chunk.choices[0]?.delta.content ?? "";
    }
    expect(text).toBe("ran: streamed-tool");
  });

  it("with X-Keel-Tool-Events, a stream carries each tool call as it starts, before the reply", async () => {
    const h = await start();
    const stream = await h.client.chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "run: echo seen-tool" }] },
      { headers: { "X-Keel-Tool-Events": "1" } },
    );
    const seen: string[] = [];
    for await (const chunk of stream) {
      const tool = (chunk as { keel_tool?: { id: string; name: string; arguments: string } })
        .keel_tool;
      if (tool) {
        expect(chunk.choices).toEqual([]);
        expect(tool.id).toMatch(/\S/);
        seen.push(`tool ${tool.name} ${JSON.parse(tool.arguments).command}`);
      }
      const piece = chunk.choices[0]?.delta.content;
      if (piece) seen.push(`text ${piece}`);
    }
    expect(seen[0]).toBe("tool terminal echo seen-tool");
    expect(seen.slice(1).every((s) => s.startsWith("text "))).toBe(true);
    expect(
      seen
        .slice(1)
        .map((s) => s.slice("text ".length))
        .join(""),
    ).toBe("ran: seen-tool");
  });

  it("runs a tool in agent.cwd and replies with its output", async () => {
    const h = await start();
    const res = await chat(h, {
      messages: [{ role: "user", content: "run: echo hi | tee hi.txt" }],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as OpenAI.ChatCompletion;
    expect(body.choices[0]!.message.content).toBe("ran: hi");
    expect(readFileSync(join(h.config.cwd, "hi.txt"), "utf8")).toBe("hi\n");

    const pwd = await chat(h, { messages: [{ role: "user", content: "run: pwd" }] });
    const pwdBody = (await pwd.json()) as OpenAI.ChatCompletion;
    expect(pwdBody.choices[0]!.message.content).toBe(`ran: ${realpathSync(h.config.cwd)}`);

    const stored = await transcript(h, res.headers.get("x-session-id")!);
    expect(stored.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(stored.messages[1]!.tool_calls).toHaveLength(1);
    expect(stored.messages[2]!.content).toContain("hi");
  });
});

describe("model failures become a clear reply and leave the session usable", () => {
  // Retries are off here: these are the failures left once retries and fallbacks are used up
  // (model-chain.test.ts and context.test.ts cover the retries).
  const NO_RETRIES = "model:\n  max_retries: 0\n";

  it("a model 500 is a 502 with an OpenAI-style error", async () => {
    const h = await start({ yaml: NO_RETRIES });
    const sessionId = await seedSession(h);
    fake.failNext(500);
    const res = await chat(
      h,
      { messages: [{ role: "user", content: "echo: lost" }] },
      { "X-Session-Id": sessionId },
    );
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { message: string; type: string } };
    expect(body.error.message).toMatch(/HTTP 500/);
    expect(body.error.type).toBeTruthy();

    // The official client surfaces it as an APIError with the message.
    fake.failNext(500);
    const err = await h.client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "echo: again" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(502);

    const after = await chat(
      h,
      { messages: [{ role: "user", content: "echo: back" }] },
      { "X-Session-Id": sessionId },
    );
    expect(after.status).toBe(200);
    expect(((await after.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe(
      "back",
    );
    const stored = roles(await transcript(h, sessionId));
    expect(stored.slice(0, 2)).toEqual(["user:echo: kept", "assistant:kept"]);
    expect(stored.slice(-2)).toEqual(["user:echo: back", "assistant:back"]);
  });

  it("a streamed request gets the error as an SSE error event", async () => {
    const h = await start({ yaml: NO_RETRIES });
    fake.failNext(503);
    const stream = await h.client.chat.completions.create({
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "echo: x" }],
    });
    const consume = async () => {
      for await (const _ of stream) {
        // drain
      }
    };
    await expect(consume()).rejects.toThrow(/HTTP 503/);
  });

  it("a hanging model times out within model.timeout_seconds", async () => {
    const h = await start({ yaml: "model:\n  timeout_seconds: 0.5\n  max_retries: 0\n" });
    const sessionId = await seedSession(h);
    fake.hangNext();
    const res = await chat(
      h,
      { messages: [{ role: "user", content: "echo: never" }] },
      { "X-Session-Id": sessionId },
    );
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/did not answer in time/);

    const after = await chat(
      h,
      { messages: [{ role: "user", content: "echo: awake" }] },
      { "X-Session-Id": sessionId },
    );
    expect(after.status).toBe(200);
    expect(roles(await transcript(h, sessionId)).slice(-2)).toEqual([
      "user:echo: awake",
      "assistant:awake",
    ]);
  });

  it("garbage from the model is a clear error", async () => {
    const h = await start();
    const sessionId = await seedSession(h);
    const res = await chat(
      h,
      { messages: [{ role: "user", content: "garbage" }] },
      { "X-Session-Id": sessionId },
    );
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/unusable response/);
    const after = await chat(
      h,
      { messages: [{ role: "user", content: "echo: fine" }] },
      { "X-Session-Id": sessionId },
    );
    expect(after.status).toBe(200);
  });
});

describe("work the gateway does not take is a 503 in OpenAI's shape", () => {
  async function expectRefusal(res: Response, code: string, retryAfter: string | null) {
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe(retryAfter);
    const body = (await res.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error).toMatchObject({ code, type: "server_error" });
    return body.error.message;
  }

  it("with no model configured: 503 model_not_configured saying how to configure one", async () => {
    const h = await start({ model: false, env: { KEEL_API_KEY: KEY } });
    const message = await expectRefusal(
      await chat(h, { messages: [{ role: "user", content: "hello?" }] }, bearer()),
      "model_not_configured",
      null,
    );
    expect(message).toMatch(/model\.base_url/);
    expect(message).toMatch(/OPENAI_BASE_URL/);

    // The official client sees an APIError for a streamed request too.
    const err = await h.client.chat.completions
      .create({ model: "m", stream: true, messages: [{ role: "user", content: "and streamed?" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((err as InstanceType<typeof OpenAI.APIError>).code).toBe("model_not_configured");

    // Nothing was stored; chat commands are still answered.
    const sessions = (await (await control(h, "/api/sessions")).json()) as { sessions: unknown[] };
    expect(sessions.sessions).toEqual([]);
    const help = await chat(h, { messages: [{ role: "user", content: "/help" }] }, bearer());
    expect(help.status).toBe(200);
    expect(fake.requests).toHaveLength(0);
  });

  it("while draining: 503 gateway_draining with Retry-After, nothing stored", async () => {
    const h = await start({ env: { KEEL_API_KEY: KEY } });
    const drain = await fetch(`${h.baseUrl}/api/gateway/drain`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${h.config.controlToken}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ action: "drain" }),
    });
    expect(drain.status).toBe(200);
    const body = { messages: [{ role: "user", content: "echo: not now" }] };
    await expectRefusal(await chat(h, body, bearer()), "gateway_draining", "30");
    await expectRefusal(
      await chat(h, { ...body, stream: true }, bearer()),
      "gateway_draining",
      "30",
    );
    const sessions = (await (await control(h, "/api/sessions")).json()) as { sessions: unknown[] };
    expect(sessions.sessions).toEqual([]);
    expect(fake.requests).toHaveLength(0);
  });

  it("while stopping: 503 gateway_stopping with Retry-After; the turn being drained still answers", async () => {
    const h = await start({ env: { KEEL_API_KEY: KEY, KEEL_RESTART_DRAIN_TIMEOUT: "60" } });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    fake.script(async (request) => {
      await gate;
      return defaultScript(request);
    });
    const running = chat(h, { messages: [{ role: "user", content: "echo: drained" }] }, bearer());
    await waitFor(() => fake.requests.length === 1, { message: "the running turn's model call" });
    h.gateway.requestStop({ restart: false, signalInitiated: false });
    await waitFor(() => h.gateway.runner.refusalFor("echo: late") === "stopping", {
      message: "admission closed",
    });
    await expectRefusal(
      await chat(h, { messages: [{ role: "user", content: "echo: late" }] }, bearer()),
      "gateway_stopping",
      "10",
    );
    open();
    const drained = await running;
    expect(drained.status).toBe(200);
    expect(((await drained.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe(
      "drained",
    );
    expect(await h.gateway.exited).toBe(0);
    expect(fake.requests).toHaveLength(1);
  });

  it("a turn cut off by a stop: 503 gateway_stopping with Retry-After, or that error event in a stream", async () => {
    const h = await start({ env: { KEEL_API_KEY: KEY } });
    fake.script({ hang: true });
    const plain = chat(h, { messages: [{ role: "user", content: "echo: cut" }] }, bearer());
    const streamed = chat(
      h,
      { stream: true, messages: [{ role: "user", content: "echo: cut too" }] },
      bearer(),
    );
    await waitFor(() => fake.requests.length === 2, { message: "both model calls started" });
    h.gateway.requestStop({ restart: false, signalInitiated: false });

    const message = await expectRefusal(await plain, "gateway_stopping", "10");
    expect(message).toMatch(/Idempotency-Key/);
    const stream = await streamed;
    expect(stream.status).toBe(200);
    const frames = (await stream.text())
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => l.slice("data: ".length));
    const errors = frames
      .filter((f) => f !== "[DONE]")
      .map((f) => JSON.parse(f) as { error?: { code: string } })
      .filter((f) => f.error);
    expect(errors.map((f) => f.error!.code)).toEqual(["gateway_stopping"]);
    expect(await h.gateway.exited).toBe(0);
  });
});

describe("bad input is refused and nothing stored changes", () => {
  let h: Harness;
  let sessionId: string;
  let before: unknown;

  beforeEach(async () => {
    h = await start({ yaml: "http:\n  max_body_bytes: 2048\n" });
    sessionId = await seedSession(h);
    before = await snapshot(h);
  });

  afterEach(async () => {
    expect(await snapshot(h)).toEqual(before);
  });

  async function expectOpenAiError(res: Response, status: number, pattern: RegExp) {
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: { message: string; type: string } };
    expect(body.error.message).toMatch(pattern);
    expect(body.error.type).toBe("invalid_request_error");
  }

  it("malformed JSON is 400", async () => {
    await expectOpenAiError(await chat(h, '{"messages": [}'), 400, /not valid JSON/);
    await expectOpenAiError(await chat(h, ""), 400, /not valid JSON/);
  });

  it("wrong types are 400 naming the field", async () => {
    await expectOpenAiError(await chat(h, { messages: "hi" }), 400, /messages/);
    await expectOpenAiError(
      await chat(h, { messages: [{ role: "user", content: 5 }] }),
      400,
      /messages\.0\.content/,
    );
    await expectOpenAiError(
      await chat(h, { messages: [{ role: "wizard", content: "x" }] }),
      400,
      /role/,
    );
    await expectOpenAiError(
      await chat(h, { stream: "yes", messages: [{ role: "user", content: "x" }] }),
      400,
      /stream/,
    );
    await expectOpenAiError(await chat(h, [1, 2]), 400, /Invalid request/);
    await expectOpenAiError(await chat(h, "null"), 400, /Invalid request/);
  });

  it("empty messages, or a last message that is not a user message, are 400", async () => {
    await expectOpenAiError(await chat(h, { messages: [] }), 400, /messages must not be empty/);
    await expectOpenAiError(
      await chat(h, { messages: [{ role: "assistant", content: "hi" }] }),
      400,
      /last message/,
    );
    await expectOpenAiError(
      await chat(h, { messages: [{ role: "user", content: "   " }] }),
      400,
      /non-empty user message/,
    );
  });

  it("an unknown X-Session-Id is 404", async () => {
    const res = await chat(
      h,
      { messages: [{ role: "user", content: "echo: hi" }] },
      { "X-Session-Id": "no-such-session" },
    );
    expect(res.status).toBe(404);
    const body = (await res.json()) as { error: { message: string; code: string } };
    expect(body.error.message).toMatch(/no-such-session/);
    expect(body.error.code).toBe("session_not_found");
    expect(fake.requests).toHaveLength(1);
  });

  it("an oversized body is 413, with or without Content-Length", async () => {
    const big = {
      messages: [{ role: "user", content: `echo: ${"x".repeat(4096)}` }],
    };
    const res = await chat(h, big, { "X-Session-Id": sessionId });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/2048/);

    const payload = new TextEncoder().encode(JSON.stringify(big));
    const chunked = await fetch(`${h.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "X-Session-Id": sessionId,
        authorization: `Bearer ${h.config.controlToken}`,
      },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < payload.length; i += 512)
            controller.enqueue(payload.slice(i, i + 512));
          controller.close();
        },
      }),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(fake.requests).toHaveLength(1);
  });

  it("a foreign Host header is 421 (DNS rebinding)", async () => {
    const res = await rawRequest(h, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { host: "evil.example:8642", "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "echo: x" }] }),
    });
    expect(res.status).toBe(421);
    const control421 = await rawRequest(h, {
      method: "GET",
      path: "/api/sessions",
      headers: { host: "evil.example", authorization: `Bearer ${h.config.controlToken}` },
    });
    expect(control421.status).toBe(421);
    const ok = await rawRequest(h, {
      method: "GET",
      path: "/healthz",
      headers: { host: `localhost:${h.gateway.port}` },
    });
    expect(ok.status).toBe(200);
  });

  it("the control API needs the control token", async () => {
    const none = await fetch(`${h.baseUrl}/api/sessions`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { message: string } }).error.message).toMatch(
      /control token/,
    );
    expect((await control(h, "/api/sessions", "wrong-token-wrong-token")).status).toBe(401);
    expect((await control(h, `/api/sessions/${sessionId}`, "x")).status).toBe(401);
    expect((await control(h, "/api/status", "")).status).toBe(401);
    expect((await control(h, "/api/sessions/no-such-id")).status).toBe(404);
  });
});

describe("API key", () => {
  it("requires the Bearer key when platforms.api.key is set", async () => {
    const key = "test-api-key-123";
    const h = await start({ env: { KEEL_API_KEY: key } });
    const body = { messages: [{ role: "user", content: "echo: secret" }] };
    const none = await chat(h, body, { authorization: "" });
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { code: string } }).error.code).toBe("invalid_api_key");
    expect((await chat(h, body, { authorization: "Bearer wrong" })).status).toBe(401);
    expect((await fetch(`${h.baseUrl}/v1/models`)).status).toBe(401);
    expect(fake.requests).toHaveLength(0);

    const done = await h.client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "echo: let in" }],
    });
    expect(done.choices[0]!.message.content).toBe("let in");
    const wrongClient = new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: "nope", maxRetries: 0 });
    await expect(wrongClient.models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });
});

describe("health", () => {
  it("/healthz and /readyz answer 200 while running", async () => {
    const h = await start();
    expect((await fetch(`${h.baseUrl}/healthz`)).status).toBe(200);
    const ready = await fetch(`${h.baseUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true });
    expect(existsSync(join(h.config.home, "state.db"))).toBe(true);
  });
});

function rawRequest(
  h: Harness,
  options: { method: string; path: string; headers: Record<string, string>; body?: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: "127.0.0.1",
        port: h.gateway.port,
        method: options.method,
        path: options.path,
        headers: options.headers,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (s: string) => (body += s));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

describe("concurrency", () => {
  it("parallel stateless requests each get their own session and reply", async () => {
    const h = await start();
    const replies = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        chat(h, { messages: [{ role: "user", content: `echo: n${i}` }] }).then(async (r) => ({
          id: r.headers.get("x-session-id"),
          text: ((await r.json()) as OpenAI.ChatCompletion).choices[0]!.message.content,
        })),
      ),
    );
    expect(replies.map((r) => r.text)).toEqual(Array.from({ length: 12 }, (_, i) => `n${i}`));
    expect(new Set(replies.map((r) => r.id)).size).toBe(12);
  });

  it("a new message interrupts the running turn of its session (busy_input_mode interrupt)", async () => {
    const h = await start();
    const sessionId = await seedSession(h);
    const slow = chat(
      h,
      { messages: [{ role: "user", content: "slow: 20000 late" }] },
      { "X-Session-Id": sessionId },
    );
    await waitFor(() => fake.requests.length === 2, { message: "the slow model call started" });
    const quick = await chat(
      h,
      { messages: [{ role: "user", content: "echo: now" }] },
      { "X-Session-Id": sessionId },
    );
    expect(quick.status).toBe(200);
    expect(((await quick.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe("now");
    const interrupted = await slow;
    expect(interrupted.status).toBe(409);
    expect(((await interrupted.json()) as { error: { code: string } }).error.code).toBe(
      "interrupted",
    );
    expect(roles(await transcript(h, sessionId)).slice(-1)).toEqual(["assistant:now"]);
  });

  for (const mode of ["queue", "steer"]) {
    it(`in busy_input_mode ${mode}, a second request gets its own answer, not a notice`, async () => {
      const h = await start({ env: { KEEL_GATEWAY_BUSY_INPUT_MODE: mode } });
      const sessionId = await seedSession(h);
      const slow = chat(
        h,
        { messages: [{ role: "user", content: "slow: 300 first" }] },
        { "X-Session-Id": sessionId },
      );
      await waitFor(() => fake.requests.length === 2, { message: "the slow model call started" });
      const second = await chat(
        h,
        { messages: [{ role: "user", content: "echo: second" }] },
        { "X-Session-Id": sessionId },
      );
      expect(second.status).toBe(200);
      expect(((await second.json()) as OpenAI.ChatCompletion).choices[0]!.message.content).toBe(
        "second",
      );
      expect(
        ((await (await slow).json()) as OpenAI.ChatCompletion).choices[0]!.message.content,
      ).toBe("first");
    });
  }
});
