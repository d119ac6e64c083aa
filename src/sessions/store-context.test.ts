/** The store contract (every implementation, see store.test.ts) for long conversations: compactions, token usage, the session's model and memory user. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { Store } from "./store.js";

describe.each(storeHarnesses())("the $name store: compactions and usage", (harness) => {
  let store: Store;
  const key = "agent:main:telegram:dm:42";

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 5_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  async function conversation() {
    const turn = await store.startTurn({
      sessionKey: key,
      inboxId: null,
      userMessage: { role: "user", content: "one" },
      memoryUser: "telegram-42",
    });
    const usage = { model: "m", promptTokens: 100, completionTokens: 10, estimated: false };
    await store.appendMessages(
      turn.sessionId,
      turn.id,
      [{ role: "assistant", content: "a" }],
      [],
      usage,
    );
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "b" },
      reply: null,
      usage: { ...usage, promptTokens: 150, estimated: true },
    });
    return turn;
  }

  it("records usage with the messages, and sums it per transcript", async () => {
    const turn = await conversation();
    expect(await store.sessionUsage(turn.sessionId)).toEqual({
      calls: 2,
      promptTokens: 250,
      completionTokens: 20,
      estimatedCalls: 1,
      lastPromptTokens: 150,
    });
    expect(await store.sessionUsage("nope")).toMatchObject({ calls: 0, lastPromptTokens: null });
  });

  it("a compaction is recorded whole with its usage; one that does not go past the latest is refused", async () => {
    const turn = await conversation();
    const seqs = (await store.loadTranscript(turn.sessionId)).map((m) => m.seq);
    const input = {
      sessionId: turn.sessionId,
      turnId: turn.id,
      throughSeq: seqs[1]!,
      summary: "s1",
      tokensBefore: 300,
      tokensAfter: 100,
      usage: { model: "m", promptTokens: 40, completionTokens: 5, estimated: false },
    };
    const first = await store.recordCompaction(input);
    expect(first).toMatchObject({ throughSeq: seqs[1], summary: "s1", tokensAfter: 100 });
    expect(await store.latestCompaction(turn.sessionId)).toEqual(first);
    await expect(store.recordCompaction({ ...input, summary: "s2" })).rejects.toThrow(
      /does not go past/,
    );
    // The refused one left nothing behind, not even its usage.
    expect(await store.latestCompaction(turn.sessionId)).toEqual(first);
    expect((await store.sessionUsage(turn.sessionId)).calls).toBe(3);
    // The transcript itself is untouched.
    expect(await store.loadTranscript(turn.sessionId)).toHaveLength(3);
  });

  it("keeps the model a session chose and whose memory its turns use, across /new", async () => {
    await conversation();
    await store.setSessionModel(key, "backup");
    const fresh = await store.resetSession(key);
    expect(fresh).toMatchObject({ model: "backup", memoryUser: "telegram-42" });
    await store.setSessionModel(key, null);
    expect((await store.getSession(key))?.model).toBeNull();
  });
});
