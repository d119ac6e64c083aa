/**
 * The chain of models against stand-in model servers on loopback: 429 with Retry-After, 503 and a
 * hang are retried on the same model, then the next model of the chain answers; a context
 * overflow or a bad request is returned at once.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { createLlmClient } from "./llm-client.js";
import { createModelChain, type ModelAttempt } from "./model-chain.js";

describe("createModelChain", () => {
  const servers: FakeOpenAI[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  async function chain(
    options: { maxRetries?: number; timeoutMs?: number; fallback?: boolean } = {},
  ) {
    const main = await startFakeOpenAI({ model: "main" });
    const backup = await startFakeOpenAI({ model: "backup" });
    servers.push(main, backup);
    const attempts: ModelAttempt[] = [];
    const client = (fake: FakeOpenAI, model: string) =>
      createLlmClient({ baseUrl: fake.baseUrl, model, timeoutMs: options.timeoutMs ?? 10_000 });
    const llm = createModelChain({
      models: [
        { name: "main", client: client(main, "main") },
        ...(options.fallback === false
          ? []
          : [{ name: "backup", client: client(backup, "backup") }]),
      ],
      maxRetries: options.maxRetries ?? 3,
      backoff: { baseMs: 20, capMs: 100, maxRetryAfterMs: 5_000 },
      onAttempt: (attempt) => attempts.push(attempt),
    });
    const ask = (text: string) =>
      llm.complete({
        messages: [{ role: "user", content: text }],
        tools: [],
        signal: new AbortController().signal,
      });
    return { main, backup, attempts, ask };
  }

  it("waits as long as a 429's Retry-After says, then retries the same model", async () => {
    const { main, backup, attempts, ask } = await chain();
    main.failNext(429, undefined, { "retry-after": "1" });
    const started = Date.now();
    const result = await ask("echo: after the limit");
    expect(result).toMatchObject({
      ok: true,
      model: "main",
      message: { content: "after the limit" },
    });
    // Retry-After is a floor the chain honours, not a timing assertion on the machine's speed.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    expect(main.requests).toHaveLength(2);
    expect(backup.requests).toHaveLength(0);
    expect(attempts[0]).toMatchObject({ model: "main", attempt: 1, status: 429, nextInMs: 1_000 });
    expect(attempts[1]).toMatchObject({ model: "main", attempt: 2, outcome: "ok" });
  });

  it("retries a 503 with backoff, and a hang after its timeout, on the same model", async () => {
    const { main, attempts, ask } = await chain({ timeoutMs: 300 });
    main.failNext(503);
    main.hangNext();
    const result = await ask("echo: third time");
    expect(result).toMatchObject({ ok: true, model: "main" });
    expect(attempts.map((a) => a.outcome)).toEqual(["http", "timeout", "ok"]);
    expect(main.requests).toHaveLength(3);
  });

  it("moves to the fallback once the retries are used up, and reports that", async () => {
    const { main, backup, attempts, ask } = await chain({ maxRetries: 2 });
    for (let i = 0; i < 3; i++) main.failNext(500);
    const result = await ask("echo: from the backup");
    expect(result).toMatchObject({
      ok: true,
      model: "backup",
      message: { content: "from the backup" },
    });
    expect(main.requests).toHaveLength(3);
    expect(backup.requests).toHaveLength(1);
    expect(attempts[2]).toMatchObject({ model: "main", attempt: 3, nextModel: "backup" });
  });

  it("a 401 goes to the fallback at once; a 400 and a context overflow end the call without retrying", async () => {
    const { main, backup, ask } = await chain();
    main.failNext(401);
    expect(await ask("echo: a")).toMatchObject({ ok: true, model: "backup" });
    expect(main.requests).toHaveLength(1);

    main.failNext(400, { error: { message: "bad", type: "invalid_request_error", code: null } });
    expect(await ask("echo: b")).toMatchObject({ ok: false, kind: "http", status: 400 });
    main.failNext(400, {
      error: {
        message: "too long",
        type: "invalid_request_error",
        code: "context_length_exceeded",
      },
    });
    expect(await ask("echo: c")).toMatchObject({ ok: false, kind: "context_exceeded" });
    expect(main.requests).toHaveLength(3);
    expect(backup.requests).toHaveLength(1);
  });

  it("does not repeat a call that failed after its text was already streamed to the user", async () => {
    const { main, backup, ask } = await chain({ timeoutMs: 400 });
    main.script({ text: "a long answer that streams slowly", chunkDelayMs: 100 });
    const result = await ask("echo: anything");
    expect(result).toMatchObject({ ok: false, kind: "timeout" });
    expect(main.requests).toHaveLength(1);
    expect(backup.requests).toHaveLength(0);
  });

  it("gives the last failure when every model keeps failing", async () => {
    const { main, ask } = await chain({ maxRetries: 1, fallback: false });
    main.script({ error: { status: 503, message: "down" } });
    expect(await ask("echo: x")).toMatchObject({ ok: false, kind: "http", status: 503 });
    expect(main.requests).toHaveLength(2);
  });
});
