/**
 * The context keeper against the stand-in model and a real store: an over-long session is
 * rescued in a bounded number of summary calls and recorded once; a failing summariser or a
 * prompt that cannot fit ends with a clear message instead of a loop; a huge tool output of the
 * current exchange is shortened in the prompt only.
 */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../../test/fakes/openai-server.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { createLlmClient } from "../agent/llm-client.js";
import { createModelChain } from "../agent/model-chain.js";
import type { ChatMessage } from "../agent/types.js";
import { normalizeHistory } from "../runner/history.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { createCompactionSink, visibleMessages } from "./compaction-record.js";
import { ContextKeeper, MAX_COMPACTIONS_PER_TURN } from "./context-keeper.js";
import { MAX_CHUNKS } from "./summariser.js";
import { TokenGauge } from "./token-gauge.js";

const WINDOW = 8192;

describe("ContextKeeper", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let fake: FakeOpenAI;
  let sessionId: string;

  beforeEach(async () => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
    fake = await startFakeOpenAI({ contextLength: WINDOW });
    sessionId = (await store.ensureSession("agent:main:test:dm:1", null)).sessionId;
  });
  afterEach(async () => {
    await fake.close();
    await store.close();
    dir.cleanup();
  });

  function keeper(summary: string | null = null) {
    return new ContextKeeper({ ...keeperOptions(), summary });
  }

  function keeperOptions() {
    const chain = createModelChain({
      models: [
        {
          name: "m",
          client: createLlmClient({ baseUrl: fake.baseUrl, model: "m", timeoutMs: 10_000 }),
        },
      ],
      maxRetries: 0,
    });
    return {
      complete: (request: Parameters<typeof chain.complete>[0]) => chain.complete(request),
      model: "m",
      windowTokens: WINDOW,
      threshold: 0.75,
      gauge: new TokenGauge(),
      summary: null as string | null,
      sink: createCompactionSink({ store, sessionId, turnId: null }),
    };
  }

  it("learns from the model's count against the prompt it measured for that call", async () => {
    const gauge = new TokenGauge();
    const k = new ContextKeeper({ ...keeperOptions(), gauge });
    const tools: never[] = [];
    const history: ChatMessage[] = [{ role: "user", content: "x".repeat(4_000) }];
    const prepared = await k.prepare("system", history, tools, new AbortController().signal);
    if (!prepared.ok) throw new Error(prepared.error);
    const measured = prepared.estimate;
    // Measured once, in prepare: the observation does not go over the messages again (the array
    // is the agent loop's own and is never changed after it was measured).
    const prompt = prepared.prompt as ChatMessage[];
    prompt[prompt.length - 1] = { role: "user", content: "short" };
    k.observe(prompt, tools, { promptTokens: measured * 2, completionTokens: 1, estimated: false });
    expect(gauge.correction).toBe(2);
    // Only for that call: the next observation of that prompt counts it anew.
    k.observe(prompt, tools, { promptTokens: measured * 2, completionTokens: 1, estimated: false });
    expect(gauge.correction).toBe(3);
  });

  /** Stores `exchanges` user/tool/answer exchanges of `outputChars` each; returns the history a turn sees. */
  async function longSession(exchanges: number, outputChars: number): Promise<ChatMessage[]> {
    for (let i = 0; i < exchanges; i++) {
      const id = `call_${i}`;
      await store.appendMessages(sessionId, null, [
        { role: "user", content: i === 0 ? "remember: harbour=oslo" : `question ${i}` },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id, type: "function", function: { name: "terminal", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: id, content: "y".repeat(outputChars) },
        { role: "assistant", content: `answer ${i}` },
      ]);
    }
    await store.appendMessages(sessionId, null, [{ role: "user", content: "recall: harbour" }]);
    return history();
  }

  async function history(): Promise<ChatMessage[]> {
    const compaction = await store.latestCompaction(sessionId);
    return normalizeHistory(visibleMessages(await store.loadTranscript(sessionId), compaction));
  }

  it("rescues a session far over the window in a bounded number of summary calls, recorded once", async () => {
    // About 200 × 1,300 tokens: some thirty times the window.
    const messages = await longSession(200, 5_000);
    const k = keeper();
    const prepared = await k.prepare("You are Keel.", messages, [], new AbortController().signal);
    expect(prepared.ok).toBe(true);
    if (!prepared.ok) return;
    expect(prepared.estimate).toBeLessThanOrEqual(WINDOW * 0.75);
    expect(prepared.dropped).toBeGreaterThan(700);
    expect(fake.requests.length).toBeLessThanOrEqual(MAX_CHUNKS);
    const compaction = await store.latestCompaction(sessionId);
    expect(compaction?.summary).toContain("remember: harbour=oslo");
    // What the next turn loads from the store is what the keeper now sends.
    expect(await history()).toEqual(messages.slice(prepared.dropped));
    expect(String(prepared.prompt[0]!.content)).toContain("remember: harbour=oslo");
  });

  it("a summariser that fails ends with a clear message after one try, and records nothing", async () => {
    const messages = await longSession(200, 5_000);
    fake.script({ error: { status: 503, message: "overloaded" } });
    const prepared = await keeper().prepare(
      "You are Keel.",
      messages,
      [],
      new AbortController().signal,
    );
    expect(prepared).toMatchObject({ ok: false });
    if (prepared.ok) return;
    expect(prepared.error).toMatch(/no longer fits the model's context window/);
    expect(prepared.error).toMatch(/\/compact .* \/new/);
    expect(prepared.error).toMatch(/summarising failed: .*HTTP 503/);
    expect(fake.requests).toHaveLength(1);
    expect(await store.latestCompaction(sessionId)).toBeNull();
  });

  it("stops summarising after a few passes in one turn, even when asked again and again", async () => {
    const messages = await longSession(3, 100);
    const k = keeper();
    // A system prompt larger than the budget: nothing can make this prompt fit.
    const huge = "z".repeat(WINDOW * 4);
    for (let i = 0; i < MAX_COMPACTIONS_PER_TURN + 3; i++) {
      const prepared = await k.prepare(huge, messages, [], new AbortController().signal, true);
      expect(prepared.ok).toBe(false);
    }
    // Each pass must shrink the prompt, and there are at most MAX_COMPACTIONS_PER_TURN of them.
    expect(fake.requests.length).toBeLessThanOrEqual(MAX_COMPACTIONS_PER_TURN);
  });

  it("shortens a huge tool output of the current exchange in the prompt, never in the store", async () => {
    await store.appendMessages(sessionId, null, [
      { role: "user", content: "big" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "terminal", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "q".repeat(100_000) },
    ]);
    const messages = await history();
    const prepared = await keeper().prepare(
      "You are Keel.",
      messages,
      [],
      new AbortController().signal,
    );
    expect(prepared.ok).toBe(true);
    if (!prepared.ok) return;
    const tool = prepared.prompt.find((m) => m.role === "tool");
    expect(tool?.content.length).toBeLessThan(2_000);
    expect(tool?.content).toContain("characters of this tool output left out");
    const stored = await store.loadTranscript(sessionId);
    expect(stored.at(-1)?.message).toMatchObject({ content: "q".repeat(100_000) });
  });
});
