/**
 * The store contract: every implementation of Store passes the same tests (SQLite and Postgres,
 * see test/helpers/store-harness.ts). What only one engine does is tested beside it
 * (sqlite-store.test.ts, pg-store.test.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { IdempotencyClaim, InboundMessage } from "../contract/platform.js";
import type { Store } from "./store.js";

function inbound(overrides: Partial<InboundMessage> = {}): InboundMessage {
  return {
    platform: "telegram",
    chatId: "42",
    platformMessageId: "1",
    sessionKey: "agent:main:telegram:dm:42",
    text: "hello",
    address: { platform: "telegram", chatId: "42", replyToMessageId: "1" },
    ...overrides,
  };
}

describe.each(storeHarnesses())("the $name store", (harness) => {
  let clock: number;
  let store: Store;

  beforeEach(async () => {
    clock = 1_000_000;
    await harness.setup();
    store = await harness.open(() => clock);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("stores an inbound message once and ignores its redelivery", async () => {
    const first = await store.acceptInbound(inbound());
    const again = await store.acceptInbound(inbound({ text: "changed" }));
    expect(first.accepted).toBe(true);
    expect(again.accepted).toBe(false);
    expect(again.item.id).toBe(first.item.id);
    expect(again.item.text).toBe("hello");
    expect(await store.listOpenInbox()).toHaveLength(1);
  });

  it("commits methods called together, each visible once it resolves", async () => {
    const calls = [1, 2, 3].map((n) =>
      store.acceptInbound(inbound({ platformMessageId: String(n), text: `m${n}` })),
    );
    const results = await Promise.all(calls);
    expect(results.map((r) => r.accepted)).toEqual([true, true, true]);
    const count = await harness.rows("SELECT COUNT(*) AS n FROM inbox");
    expect(Number(count[0]?.n)).toBe(3);
    const texts = (await store.listOpenInbox()).map((i) => i.text);
    expect(texts.sort()).toEqual(["m1", "m2", "m3"]);
  });

  it("starts one turn for a batch of waiting messages and closes them all when it ends", async () => {
    const items = [];
    for (const n of [1, 2, 3]) {
      const { item } = await store.acceptInbound(
        inbound({ platformMessageId: String(n), text: `m${n}` }),
      );
      items.push(item);
    }
    const [first, ...rest] = items;
    const turn = await store.startTurn({
      sessionKey: first!.sessionKey,
      inboxId: first!.id,
      userMessage: { role: "user", content: "m1" },
      joined: rest.map((item) => ({
        inboxId: item.id,
        userMessage: { role: "user", content: item.text },
      })),
    });
    const transcript = await store.loadTranscript(turn.sessionId);
    expect(transcript.map((m) => m.message.content)).toEqual(["m1", "m2", "m3"]);
    // Taken, not closed: a crash now leaves the turn running and the batch resumes as a whole.
    expect((await store.listOpenInbox()).map((i) => i.state)).toEqual([
      "running",
      "running",
      "running",
    ]);
    expect(await store.findInboxAnswer(rest[1]!.id)).toEqual({
      state: "open",
      sessionKey: first!.sessionKey,
    });
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "all three" },
      reply: { address: first!.address, text: "all three" },
    });
    expect(await store.listOpenInbox()).toEqual([]);
    for (const item of items) {
      expect(await store.findInboxAnswer(item.id)).toEqual({
        state: "answered",
        outcome: "reply",
        text: "all three",
      });
    }
  });

  it("refuses a batch one of whose messages another turn took, storing nothing", async () => {
    const a = (await store.acceptInbound(inbound({ platformMessageId: "1", text: "a" }))).item;
    const b = (await store.acceptInbound(inbound({ platformMessageId: "2", text: "b" }))).item;
    await store.startTurn({
      sessionKey: b.sessionKey,
      inboxId: b.id,
      userMessage: { role: "user", content: "b" },
    });
    await expect(
      store.startTurn({
        sessionKey: a.sessionKey,
        inboxId: a.id,
        userMessage: { role: "user", content: "a" },
        joined: [{ inboxId: b.id, userMessage: { role: "user", content: "b" } }],
      }),
    ).rejects.toThrow(/already taken/);
    const open = await store.listOpenInbox();
    expect(open.map((i) => [i.text, i.state])).toEqual([
      ["a", "pending"],
      ["b", "running"],
    ]);
    expect((await store.loadTranscript(a.sessionId)).map((m) => m.message.content)).toEqual(["b"]);
  });

  it("lists sessions with their first message, chat name and tokens; totals every call", async () => {
    const { item } = await store.acceptInbound(inbound({ text: "first words", senderName: "Ann" }));
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: "first words" },
      origin: item.address,
    });
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "reply" },
      usage: { model: "m", promptTokens: 120, completionTokens: 30, estimated: false },
      reply: null,
    });
    const [summary] = await store.listSessions({ internal: false });
    expect(summary).toMatchObject({
      firstMessage: "first words",
      lastMessage: "reply",
      messageCount: 2,
      chatName: "Ann",
      promptTokens: 120,
      completionTokens: 30,
    });
    expect(await store.totalUsage()).toMatchObject({
      calls: 1,
      promptTokens: 120,
      completionTokens: 30,
      lastPromptTokens: null,
    });
  });

  it("lists a session's current transcript: its count, first user and last message, its tokens", async () => {
    const usage = (promptTokens: number) => ({
      model: "m",
      promptTokens,
      completionTokens: 1,
      estimated: false,
    });
    const other = await store.startTurn({
      sessionKey: "agent:main:api:other",
      inboxId: null,
      userMessage: { role: "user", content: "another chat" },
    });
    const turn = await store.startTurn({
      sessionKey: "agent:main:api:a",
      inboxId: null,
      userMessage: { role: "user", content: "question one" },
    });
    await store.appendMessages(
      turn.sessionId,
      turn.id,
      [
        { role: "assistant", content: "thinking" },
        { role: "user", content: "question two" },
      ],
      [],
      usage(10),
    );
    await store.appendMessages(other.sessionId, other.id, [], [], usage(1000));
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "the answer" },
      usage: usage(20),
      reply: null,
    });
    const listed = async () =>
      (await store.listSessions({ internal: false })).find((s) => s.key === "agent:main:api:a");
    expect(await listed()).toMatchObject({
      sessionId: turn.sessionId,
      messageCount: 4,
      firstMessage: "question one",
      lastMessage: "the answer",
      promptTokens: 30,
      completionTokens: 2,
    });
    // /new: the session lists its new transcript, empty so far.
    const fresh = await store.resetSession("agent:main:api:a");
    expect(await listed()).toMatchObject({
      sessionId: fresh.sessionId,
      messageCount: 0,
      firstMessage: null,
      lastMessage: null,
      promptTokens: 0,
      completionTokens: 0,
    });
  });

  it("creates the session on first contact with its origin chat", async () => {
    await store.acceptInbound(inbound());
    const session = await store.getSession("agent:main:telegram:dm:42");
    expect(session?.origin).toEqual({ platform: "telegram", chatId: "42", replyToMessageId: "1" });
    expect(session?.resumePending).toBe(false);
  });

  it("moves the origin when a turn starts, not when a later message (a /restart) arrives", async () => {
    const key = "agent:main:telegram:dm:42";
    const address = (id: string) => ({ platform: "telegram", chatId: "42", replyToMessageId: id });
    await store.acceptInbound(inbound());
    const { item } = await store.acceptInbound(
      inbound({ platformMessageId: "2", text: "do it", address: address("2") }),
    );
    const started = await store.startTurn({
      sessionKey: key,
      inboxId: item.id,
      userMessage: { role: "user", content: "do it" },
      origin: item.address,
      memoryUser: "telegram-7",
    });
    // The turn carries its session as the start left it: no second read needed.
    expect(started.session).toEqual(await store.getSession(key));
    expect(started.session).toMatchObject({ origin: address("2"), memoryUser: "telegram-7" });
    await store.acceptInbound(
      inbound({ platformMessageId: "3", text: "/restart", address: address("3") }),
    );
    expect((await store.getSession(key))?.origin).toEqual(address("2"));
    // A resume continues the same request: no origin given, none moved.
    const resumed = await store.startTurn({
      sessionKey: key,
      inboxId: null,
      userMessage: null,
      origin: null,
    });
    expect((await store.getSession(key))?.origin).toEqual(address("2"));
    expect(resumed.session).toMatchObject({ origin: address("2"), memoryUser: "telegram-7" });
  });

  it("starts the first turn of a key it has never seen, creating its session", async () => {
    const turn = await store.startTurn({
      sessionKey: "agent:main:api:new",
      inboxId: null,
      userMessage: { role: "user", content: "hi" },
    });
    expect(turn.session).toMatchObject({ key: "agent:main:api:new", sessionId: turn.sessionId });
    expect(turn.session.origin).toBeNull();
  });

  /** A message accepted and its turn started, the user's text appended. */
  async function startedTurn(content: string, message: Partial<InboundMessage> = {}) {
    const { item } = await store.acceptInbound(inbound({ text: content, ...message }));
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content },
    });
    return { item, turn };
  }

  /** Journals a `terminal` call as started in `turn`. */
  function startTerminalCall(turn: { id: number; sessionId: string }, toolCallId: string) {
    return store.recordToolStart({
      toolCallId,
      turnId: turn.id,
      sessionId: turn.sessionId,
      name: "terminal",
      arguments: "{}",
    });
  }

  it("reads a turn's history at once: latest compaction, the messages after it, calls cut off", async () => {
    const { turn } = await startedTurn("one");
    await store.appendMessages(turn.sessionId, turn.id, [
      { role: "assistant", content: "two" },
      { role: "user", content: "three" },
    ]);
    const empty = await store.loadTurnHistory(turn.sessionId);
    expect(empty.compaction).toBeNull();
    expect(empty.messages.map((m) => m.message.content)).toEqual(["one", "two", "three"]);
    expect(empty.unfinished).toEqual([]);
    const [first] = empty.messages;
    await store.recordCompaction({
      sessionId: turn.sessionId,
      turnId: turn.id,
      throughSeq: first!.seq,
      summary: "said one",
      tokensBefore: 10,
      tokensAfter: 5,
      usage: null,
    });
    await startTerminalCall(turn, "c1");
    const loaded = await store.loadTurnHistory(turn.sessionId);
    expect(loaded.compaction).toMatchObject({ summary: "said one", throughSeq: first!.seq });
    expect(loaded.messages.map((m) => m.message.content)).toEqual(["two", "three"]);
    expect(loaded.unfinished.map((c) => [c.toolCallId, c.name])).toEqual([["c1", "terminal"]]);
  });

  it("gives a request notice once until a turn answers, across a reopen", async () => {
    const key = "agent:main:telegram:dm:42";
    const { item } = await store.acceptInbound(inbound());
    const notice = (text: string) =>
      store.enqueueRequestNotice({
        sessionKey: key,
        notice: "held_back",
        address: item.address,
        text,
      });
    expect((await notice("on hold"))?.text).toBe("on hold");
    await store.close();
    store = await harness.open(() => clock);
    expect(await notice("on hold again")).toBeNull();
    expect((await store.getSession(key))?.requestNotice).toBe("held_back");
    expect(
      (
        await store.enqueueRequestNotice({
          sessionKey: key,
          notice: "dropped",
          address: item.address,
          text: "dropped",
        })
      )?.text,
    ).toBe("dropped");
    const turn = await store.startTurn({
      sessionKey: key,
      inboxId: item.id,
      userMessage: { role: "user", content: "hello" },
    });
    await store.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });
    expect((await store.getSession(key))?.requestNotice).toBeNull();
    expect(await notice("a new request on hold")).not.toBeNull();
    expect((await store.listPendingOutbox()).map((o) => o.text)).toEqual([
      "on hold",
      "dropped",
      "a new request on hold",
    ]);
  });

  it("keeps accepted messages across a reopen", async () => {
    await store.acceptInbound(inbound());
    await store.close();
    store = await harness.open(() => clock);
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["hello"]);
  });

  it("runs a turn: user message, tool journal, final message and outbox in order", async () => {
    const { item, turn } = await startedTurn("hello");
    expect((await store.listOpenInbox())[0]?.state).toBe("running");
    const call = {
      id: "c1",
      type: "function" as const,
      function: { name: "terminal", arguments: '{"command":"ls"}' },
    };
    await store.appendMessages(turn.sessionId, turn.id, [
      { role: "assistant", content: null, tool_calls: [call] },
    ]);
    await startTerminalCall(turn, "c1");
    expect((await store.loadTurnHistory(turn.sessionId)).unfinished).toHaveLength(1);
    await store.recordToolFinish({
      toolCallId: "c1",
      turnId: turn.id,
      sessionId: turn.sessionId,
      result: "file.txt",
    });
    expect((await store.loadTurnHistory(turn.sessionId)).unfinished).toHaveLength(0);
    const outbox = await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "done" },
      reply: { address: item.address, text: "done" },
    });
    expect(outbox?.state).toBe("pending");
    expect(await store.listOpenInbox()).toHaveLength(0);
    expect(await store.listRunningTurns()).toHaveLength(0);
    const roles = (await store.loadTranscript(turn.sessionId)).map((m) => m.message.role);
    expect(roles).toEqual(["user", "assistant", "tool", "assistant"]);
    await store.markDelivered(outbox!.id);
    expect(await store.listPendingOutbox()).toHaveLength(0);
  });

  it("stores a reply answered in band as delivered, never to be sent, and still answers with it", async () => {
    const address = { platform: "api", chatId: "agent:main:api:s1" };
    const { item, turn } = await startedTurn("hello", {
      platform: "api",
      chatId: address.chatId,
      sessionKey: address.chatId,
      address,
    });
    const outbox = await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "hi" },
      reply: { address, text: "hi", inBand: true },
    });
    expect(outbox).toMatchObject({ state: "delivered", text: "hi" });
    expect(await store.listPendingOutbox()).toEqual([]);
    expect(await store.findInboxAnswer(item.id)).toEqual({
      state: "answered",
      outcome: "reply",
      text: "hi",
    });
  });

  it("never lists a row sent directly by its writer (a stop notice must not arrive late)", async () => {
    const s = await store.ensureSession("k", { platform: "telegram", chatId: "1" });
    const row = await store.enqueueOutbox({
      sessionKey: "k",
      sessionId: s.sessionId,
      address: { platform: "telegram", chatId: "1" },
      text: "restarting",
      kind: "notice",
      direct: true,
    });
    expect(row.state).toBe("sending");
    expect(await store.listPendingOutbox()).toHaveLength(0);
    await store.markDeliveryFailed(row.id, 1);
    expect(await store.listPendingOutbox()).toHaveLength(0);
  });

  it("gives up on an outbox row after the maximum attempts", async () => {
    const s = await store.ensureSession("k", { platform: "telegram", chatId: "1" });
    const row = await store.enqueueOutbox({
      sessionKey: "k",
      sessionId: s.sessionId,
      address: { platform: "telegram", chatId: "1" },
      text: "x",
      kind: "notice",
    });
    await store.markDeliveryFailed(row.id, 2);
    expect(await store.listPendingOutbox("telegram")).toHaveLength(1);
    await store.markDeliveryFailed(row.id, 2);
    expect(await store.listPendingOutbox("telegram")).toHaveLength(0);
  });

  it("counts sessions and resume-pending ones in one read, Keel's own lanes included", async () => {
    expect(await store.countSessions()).toEqual({ total: 0, resumePending: 0 });
    await store.ensureSession("agent:main:telegram:dm:1", null);
    await store.ensureSession("agent:main:telegram:dm:2", null);
    await store.ensureSession("system:notices:telegram:3", null);
    await store.markResumePending(["agent:main:telegram:dm:2"], "restart_timeout");
    expect(await store.countSessions()).toEqual({ total: 3, resumePending: 1 });
  });

  it("keeps the first resume reason and counts interruptions; a finished turn clears both", async () => {
    const { item } = await store.acceptInbound(inbound());
    await store.markResumePending([item.sessionKey], "restart_timeout");
    await store.markResumePending([item.sessionKey], "restart_interrupted");
    let s = await store.getSession(item.sessionKey);
    expect(s?.resumeReason).toBe("restart_timeout");
    expect(s?.interruptCount).toBe(1);
    await store.clearResumePending(item.sessionKey);
    await store.markResumePending([item.sessionKey], "shutdown_timeout");
    expect((await store.getSession(item.sessionKey))?.interruptCount).toBe(2);
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: null,
    });
    await store.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });
    s = await store.getSession(item.sessionKey);
    expect(s?.resumePending).toBe(false);
    expect(s?.interruptCount).toBe(0);
  });

  it("points a session key at a fresh transcript on reset and keeps the old one readable", async () => {
    const { item } = await store.acceptInbound(inbound());
    const before = await store.getSession(item.sessionKey);
    await store.appendMessages(before!.sessionId, null, [{ role: "user", content: "old" }]);
    const after = await store.resetSession(item.sessionKey);
    expect(after.sessionId).not.toBe(before!.sessionId);
    expect(await store.loadTranscript(after.sessionId)).toHaveLength(0);
    expect((await store.getSessionById(before!.sessionId))?.key).toBe(item.sessionKey);
  });

  it("seeds a new session with the history an API request carried", async () => {
    const { item } = await store.acceptInbound(
      inbound({
        platform: "api",
        history: [
          { role: "user", content: "a" },
          { role: "assistant", content: "b" },
        ],
      }),
    );
    const contents = (await store.loadTranscript(item.sessionId)).map((m) => m.message.content);
    expect(contents).toEqual(["a", "b"]);
  });

  it("loads a transcript's tail after a given message, in order", async () => {
    const { item } = await store.acceptInbound(inbound());
    await store.appendMessages(item.sessionId, null, [
      { role: "user", content: "one" },
      { role: "assistant", content: "two" },
      { role: "user", content: "three" },
    ]);
    const all = await store.loadTranscript(item.sessionId);
    const tail = await store.loadTranscript(item.sessionId, all[0]!.seq);
    expect(tail.map((m) => m.message.content)).toEqual(["two", "three"]);
    expect(await store.loadTranscript(item.sessionId, all[2]!.seq)).toEqual([]);
  });

  it("keeps a platform adapter's state per key across reopening, and deletes it with null", async () => {
    expect(await store.getPlatformState("discord:gateway")).toBeNull();
    await store.setPlatformState("discord:gateway", { sessionId: "s1", sequence: 3 });
    await store.setPlatformState("discord:gateway", { sessionId: "s1", sequence: 7 });
    await store.setPlatformState("other", [1, 2]);
    await store.close();
    store = await harness.open(() => clock);
    expect(await store.getPlatformState("discord:gateway")).toEqual({
      sessionId: "s1",
      sequence: 7,
    });
    await store.setPlatformState("discord:gateway", null);
    expect(await store.getPlatformState("discord:gateway")).toBeNull();
    expect(await store.getPlatformState("other")).toEqual([1, 2]);
  });

  it("lists each recently active chat of a platform with its latest stored message", async () => {
    const discord = (chatId: string, id: string) =>
      inbound({
        platform: "discord",
        chatId,
        platformMessageId: id,
        sessionKey: `agent:main:discord:dm:${chatId}`,
        address: { platform: "discord", chatId },
      });
    await store.acceptInbound(discord("old", "5"));
    clock += 10_000;
    await store.acceptInbound(discord("a", "10"));
    await store.acceptInbound(discord("b", "11"));
    await store.acceptInbound(discord("a", "12"));
    await store.acceptInbound(inbound());
    const recent = await store.listRecentChats("discord", clock - 1);
    expect(recent.map((c) => [c.chatId, c.lastMessageId])).toEqual([
      ["b", "11"],
      ["a", "12"],
    ]);
  });

  describe("idempotency keys", () => {
    const claim = (over: Partial<IdempotencyClaim> = {}): IdempotencyClaim => ({
      scope: "scope-a",
      key: "k1",
      requestHash: "h1",
      ttlMs: 1000,
      ...over,
    });
    const api = (id: string, over: Partial<InboundMessage> = {}) =>
      inbound({
        platform: "api",
        chatId: `agent:main:api:${id}`,
        sessionKey: `agent:main:api:${id}`,
        platformMessageId: id,
        address: { platform: "api", chatId: `agent:main:api:${id}` },
        ...over,
      });

    it("stores a key with its message; a repeat returns the first item and stores nothing", async () => {
      const first = await store.acceptInbound(api("s1", { idempotency: claim() }));
      expect(first.accepted).toBe(true);
      // A repeat aimed at a new session must not even create that session.
      const again = await store.acceptInbound(api("s2", { idempotency: claim() }));
      expect(again).toEqual({ accepted: false, item: first.item });
      expect(await store.getSession("agent:main:api:s2")).toBeNull();
      const other = await store.acceptInbound(
        api("s3", { idempotency: claim({ requestHash: "h2" }) }),
      );
      expect(other).toMatchObject({ accepted: false, idempotencyConflict: true });
      expect(other.item.id).toBe(first.item.id);
      expect(await store.getSession("agent:main:api:s3")).toBeNull();
      // Another credential's key of the same name is its own.
      const otherScope = await store.acceptInbound(
        api("s4", { idempotency: claim({ scope: "scope-b" }) }),
      );
      expect(otherScope.accepted).toBe(true);
      expect(await store.findIdempotencyKey("scope-a", "k1")).toMatchObject({
        requestHash: "h1",
        item: { id: first.item.id },
      });
      expect(await store.findIdempotencyKey("scope-c", "k1")).toBeNull();
    });

    it("expires keys after their ttl and prunes them when the next key is stored", async () => {
      await store.acceptInbound(api("s1", { idempotency: claim() }));
      clock += 999;
      expect(await store.findIdempotencyKey("scope-a", "k1")).not.toBeNull();
      clock += 1;
      expect(await store.findIdempotencyKey("scope-a", "k1")).toBeNull();
      const fresh = await store.acceptInbound(api("s2", { idempotency: claim() }));
      expect(fresh.accepted).toBe(true);
      await store.acceptInbound(api("s3", { idempotency: claim({ key: "k2" }) }));
      const rows = await harness.rows("SELECT inbox_id FROM idempotency_keys ORDER BY inbox_id");
      expect(rows.map((r) => Number(r.inbox_id))).toEqual([fresh.item.id, fresh.item.id + 1]);
    });

    it("frees the key of a refused (cancelled) message, not of an answered one", async () => {
      const refused = await store.acceptInbound(api("s1", { idempotency: claim() }));
      await store.closeInboxItem(refused.item.id, "cancelled", "not now");
      expect(await store.findIdempotencyKey("scope-a", "k1")).toBeNull();
      const answered = await store.acceptInbound(api("s2", { idempotency: claim() }));
      await store.closeInboxItem(answered.item.id, "done", "a command's answer");
      expect(await store.findIdempotencyKey("scope-a", "k1")).not.toBeNull();
    });
  });

  describe("the answer of an inbox item", () => {
    const key = "agent:main:telegram:dm:42";

    async function runTurn(
      inboxId: number | null,
      state: "done" | "failed" | "interrupted",
      reply: string | null,
    ) {
      const turn = await store.startTurn({
        sessionKey: key,
        inboxId,
        userMessage: inboxId === null ? null : { role: "user", content: "hi" },
      });
      await store.finishTurn({
        turnId: turn.id,
        state,
        finalMessage: reply === null ? null : { role: "assistant", content: reply },
        reply:
          reply === null ? null : { address: { platform: "telegram", chatId: "42" }, text: reply },
      });
      return turn;
    }

    it("is open while queued or running, then the turn's reply or error", async () => {
      const { item } = await store.acceptInbound(inbound());
      expect(await store.findInboxAnswer(item.id)).toEqual({ state: "open", sessionKey: key });
      const turn = await store.startTurn({ sessionKey: key, inboxId: item.id, userMessage: null });
      expect(await store.findInboxAnswer(item.id)).toMatchObject({ state: "open" });
      await store.finishTurn({
        turnId: turn.id,
        state: "done",
        finalMessage: { role: "assistant", content: "hello back" },
        reply: { address: item.address, text: "hello back" },
      });
      expect(await store.findInboxAnswer(item.id)).toEqual({
        state: "answered",
        outcome: "reply",
        text: "hello back",
      });
      const failing = await store.acceptInbound(inbound({ platformMessageId: "2" }));
      await runTurn(failing.item.id, "failed", "model error text");
      expect(await store.findInboxAnswer(failing.item.id)).toEqual({
        state: "answered",
        outcome: "failed",
        text: "model error text",
      });
    });

    it("follows a turn cut off by a restart into the turn that resumed it", async () => {
      const { item } = await store.acceptInbound(inbound());
      await runTurn(item.id, "interrupted", null);
      await store.markResumePending([key], "restart_interrupted");
      // Cut off, its resume still to come: open.
      expect(await store.findInboxAnswer(item.id)).toMatchObject({ state: "open" });
      const resume = await store.startTurn({ sessionKey: key, inboxId: null, userMessage: null });
      expect(await store.findInboxAnswer(item.id)).toMatchObject({ state: "open" });
      await store.finishTurn({
        turnId: resume.id,
        state: "interrupted",
        finalMessage: null,
        reply: null,
      });
      await runTurn(null, "done", "resumed answer");
      expect(await store.findInboxAnswer(item.id)).toEqual({
        state: "answered",
        outcome: "reply",
        text: "resumed answer",
      });
    });

    it("is 'interrupted' when a newer message superseded the cut-off turn, or nothing continues it", async () => {
      const first = await store.acceptInbound(inbound());
      await runTurn(first.item.id, "interrupted", null);
      // Not resume-pending (e.g. /stop): nothing will continue it.
      expect(await store.findInboxAnswer(first.item.id)).toMatchObject({
        state: "answered",
        outcome: "interrupted",
      });
      await store.markResumePending([key], "restart_interrupted");
      const newer = await store.acceptInbound(inbound({ platformMessageId: "2" }));
      await runTurn(newer.item.id, "done", "newer answer");
      expect(await store.findInboxAnswer(first.item.id)).toMatchObject({
        state: "answered",
        outcome: "interrupted",
      });
    });

    it("is the notice that closed it without a turn, or unrecorded when there is none", async () => {
      const command = await store.acceptInbound(inbound({ text: "/help" }));
      await store.closeInboxItem(command.item.id, "done", "the help text");
      expect(await store.findInboxAnswer(command.item.id)).toEqual({
        state: "answered",
        outcome: "notice",
        text: "the help text",
      });
      const silent = await store.acceptInbound(inbound({ platformMessageId: "2", text: "/stop" }));
      await store.closeInboxItem(silent.item.id, "done");
      expect(await store.findInboxAnswer(silent.item.id)).toEqual({ state: "unrecorded" });
    });
  });

  it("issues pairing codes: one per user, at most three pending, expiring, approvable once", async () => {
    const ask = (userId: string) =>
      store.requestPairing({
        platform: "telegram",
        userId,
        userName: null,
        chatId: userId,
        ttlMs: 3_600_000,
        maxPending: 3,
      });
    const a = await ask("1");
    expect(a?.code).toMatch(/^[A-Z2-9]{8}$/);
    expect((await ask("1"))?.code).toBe(a?.code);
    await ask("2");
    await ask("3");
    expect(await ask("4")).toBeNull();
    expect(await store.isUserApproved("telegram", "1")).toBe(false);
    expect((await store.approvePairing(a!.code.toLowerCase()))?.userId).toBe("1");
    expect(await store.isUserApproved("telegram", "1")).toBe(true);
    expect(await store.approvePairing(a!.code)).toBeNull();
    clock += 3_600_001;
    expect(await store.listPairingRequests()).toHaveLength(0);
    expect(await ask("4")).not.toBeNull();
  });

  it("queues the approval notice with the approval, lists approved users, and revokes them", async () => {
    const request = await store.requestPairing({
      platform: "telegram",
      userId: "7",
      userName: "ann",
      chatId: "70",
      ttlMs: 3_600_000,
      maxPending: 3,
    });
    await store.approvePairing(request!.code, "you're in");
    const [notice] = await store.listPendingOutbox("telegram");
    expect(notice).toMatchObject({
      address: { platform: "telegram", chatId: "70" },
      text: "you're in",
      kind: "notice",
      sessionKey: "system:notices:telegram:70",
    });
    expect((await store.listSessions({ internal: false })).map((s) => s.key)).toEqual([]);
    expect((await store.listSessions()).map((s) => s.key)).toEqual(["system:notices:telegram:70"]);
    expect((await store.listApprovedUsers()).map((u) => [u.userId, u.userName])).toEqual([
      ["7", "ann"],
    ]);
    expect(await store.revokeUser("telegram", "7")).toBe(1);
    expect(await store.isUserApproved("telegram", "7")).toBe(false);
    expect(await store.listApprovedUsers()).toEqual([]);
    expect(await store.revokeUser("telegram", "7")).toBe(0);
  });

  it("replays channel events after a sequence number", async () => {
    const s1 = await store.appendChannelEvent("web:a", { n: 1 });
    await store.appendChannelEvent("web:b", { n: 2 });
    const s3 = await store.appendChannelEvent("web:a", { n: 3 });
    expect(await store.listChannelEvents("web:a", 0)).toEqual([
      { seq: s1, payload: { n: 1 } },
      { seq: s3, payload: { n: 3 } },
    ]);
    expect(await store.listChannelEvents("web:a", s1)).toEqual([{ seq: s3, payload: { n: 3 } }]);
  });
});
