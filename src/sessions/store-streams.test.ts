/** The store contract for stream messages, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { ChatAddress } from "../contract/platform.js";
import type { Store, StreamMessage } from "./store.js";

const address: ChatAddress = { platform: "telegram", chatId: "42", replyToMessageId: "1" };

describe.each(storeHarnesses())("the $name store: stream messages", (harness) => {
  let store: Store;
  let clock = 1_000_000_000;

  beforeEach(async () => {
    clock = 1_000_000_000;
    await harness.setup();
    store = await harness.open(() => clock);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  async function turn(text = "hello"): Promise<number> {
    const { item } = await store.acceptInbound({
      platform: "telegram",
      chatId: "42",
      platformMessageId: text,
      sessionKey: "agent:main:telegram:dm:42",
      text,
      address,
    });
    const started = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: text },
      origin: address,
    });
    return started.id;
  }

  const message = (turnId: number, piece: number, text: string): StreamMessage => ({
    turnId,
    piece,
    address,
    messageId: String(100 + piece),
    text,
    state: "open",
  });

  it("keeps one row per turn and piece, replaced by each save, in piece order", async () => {
    const turnId = await turn();
    await store.saveStreamMessage(message(turnId, 1, "second"));
    await store.saveStreamMessage(message(turnId, 0, "fir"));
    await store.saveStreamMessage(message(turnId, 0, "first"));
    const stream = await store.getStreamTurn(turnId);
    expect(stream.turnState).toBe("running");
    expect(stream.messages.map((m) => [m.piece, m.text, m.messageId])).toEqual([
      [0, "first", "100"],
      [1, "second", "101"],
    ]);
    expect(stream.messages[0]!.address).toEqual(address);
  });

  it("lists as leftovers only open streams of ended turns with no reply waiting", async () => {
    const running = await turn("a");
    await store.saveStreamMessage(message(running, 0, "still writing"));
    // Cut off (no reply): a leftover.
    const cut = await turn("b");
    await store.saveStreamMessage(message(cut, 0, "cut off"));
    await store.finishTurn({ turnId: cut, state: "interrupted", finalMessage: null, reply: null });
    // Answered with a reply still pending: the delivery finishes it, not the sweep.
    const answered = await turn("c");
    await store.saveStreamMessage(message(answered, 0, "answer"));
    const outbox = await store.finishTurn({
      turnId: answered,
      state: "done",
      finalMessage: { role: "assistant", content: "answer" },
      reply: { address, text: "answer" },
    });
    // Already marked: not a leftover any more.
    const marked = await turn("d");
    await store.saveStreamMessage({ ...message(marked, 0, "x"), state: "interrupted" });
    await store.finishTurn({
      turnId: marked,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });

    let leftovers = await store.listLeftoverStreams("telegram");
    expect(leftovers.map((t) => [t.turnId, t.turnState])).toEqual([[cut, "interrupted"]]);
    expect(await store.listLeftoverStreams("discord")).toEqual([]);

    // A reply given up on leaves its stream to the sweep.
    await store.markDeliveryFailed(outbox!.id, 1);
    leftovers = await store.listLeftoverStreams("telegram");
    expect(leftovers.map((t) => [t.turnId, t.turnState])).toEqual([
      [cut, "interrupted"],
      [answered, "done"],
    ]);
  });

  it("forgets finished streams a week old when a new stream starts, never open ones", async () => {
    const old = await turn("old");
    await store.saveStreamMessage({ ...message(old, 0, "done"), state: "final" });
    const cut = await turn("cut");
    await store.saveStreamMessage(message(cut, 0, "still open"));
    clock += 8 * 24 * 3600 * 1000;
    const fresh = await turn("fresh");
    await store.saveStreamMessage(message(fresh, 0, "new"));
    expect((await store.getStreamTurn(old)).messages).toEqual([]);
    expect((await store.getStreamTurn(cut)).messages).toHaveLength(1);
    expect((await store.getStreamTurn(fresh)).messages).toHaveLength(1);
  });
});
