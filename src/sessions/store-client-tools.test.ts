/**
 * The store contract for `/v1` client tools and stateless threads, on every implementation (see
 * store.test.ts): what the inbox row keeps, what `startTurn` records and appends in its
 * transaction, and how a thread finds its session.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { ClientToolSpec, InboundMessage } from "../contract/platform.js";
import type { Store } from "./store.js";

const KEY = "agent:main:api:7c1d";
const LOOKUP: ClientToolSpec = {
  type: "function",
  function: { name: "lookup", parameters: { type: "object", properties: {} } },
};

function apiMessage(id: string, extra: Partial<InboundMessage> = {}): InboundMessage {
  return {
    platform: "api",
    chatId: KEY,
    platformMessageId: id,
    sessionKey: KEY,
    text: `message ${id}`,
    address: { platform: "api", chatId: KEY },
    ...extra,
  };
}

describe.each(storeHarnesses())("the $name store: /v1 client tools and threads", (harness) => {
  let store: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 1_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("keeps an inbox row's client tools and thread, and finds the newest row's session by it", async () => {
    const clientTools = { tools: [LOOKUP], results: [{ toolCallId: "call_1", content: "42" }] };
    const { item } = await store.acceptInbound(apiMessage("1", { clientTools, thread: "t-1" }));
    expect(item.clientTools).toEqual(clientTools);
    expect(item.thread).toBe("t-1");
    expect(await store.findThread("t-1")).toEqual({ sessionKey: KEY, sessionId: item.sessionId });
    expect(await store.findThread("t-2")).toBeNull();

    const fresh = await store.resetSession(KEY);
    await store.acceptInbound(apiMessage("2", { thread: "t-1" }));
    expect(await store.findThread("t-1")).toEqual({ sessionKey: KEY, sessionId: fresh.sessionId });
  });

  it("records the client's functions on the session and appends the results after the user message", async () => {
    const { item } = await store.acceptInbound(apiMessage("1"));
    const turn = await store.startTurn({
      sessionKey: KEY,
      inboxId: item.id,
      userMessage: { role: "user", content: "look it up" },
      inputMessages: [{ role: "tool", tool_call_id: "call_1", content: "42" }],
      clientTools: [LOOKUP],
    });
    expect(turn.session.clientTools).toEqual([LOOKUP]);
    expect((await store.loadTranscript(turn.sessionId)).map((m) => m.message)).toEqual([
      { role: "user", content: "look it up" },
      { role: "tool", tool_call_id: "call_1", content: "42" },
    ]);
    await store.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });

    // Absent keeps them (a resume); null clears them (a request offering none).
    const resumed = await store.startTurn({ sessionKey: KEY, inboxId: null, userMessage: null });
    expect(resumed.session.clientTools).toEqual([LOOKUP]);
    await store.finishTurn({ turnId: resumed.id, state: "done", finalMessage: null, reply: null });
    const { item: next } = await store.acceptInbound(apiMessage("2"));
    const cleared = await store.startTurn({
      sessionKey: KEY,
      inboxId: next.id,
      userMessage: { role: "user", content: "no tools now" },
      clientTools: null,
    });
    expect(cleared.session.clientTools).toBeNull();
    expect((await store.getSession(KEY))?.clientTools).toBeNull();
  });
});
