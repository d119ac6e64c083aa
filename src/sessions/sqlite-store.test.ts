import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { InboundMessage } from "../platforms/platform.js";
import { SqliteStore } from "./sqlite-store.js";

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

describe("SqliteStore", () => {
  let dir: ReturnType<typeof createTempDir>;
  let path: string;
  let clock: number;
  let store: SqliteStore;

  beforeEach(() => {
    dir = createTempDir();
    path = join(dir.path, "state.db");
    clock = 1_000_000;
    store = new SqliteStore(path, { now: () => clock });
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
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

  it("commits methods called together in one transaction, each visible once it resolves", async () => {
    const calls = [1, 2, 3].map((n) =>
      store.acceptInbound(inbound({ platformMessageId: String(n), text: `m${n}` })),
    );
    const results = await Promise.all(calls);
    expect(results.map((r) => r.accepted)).toEqual([true, true, true]);
    const other = new Database(path, { readonly: true });
    const count = other.prepare("SELECT COUNT(*) AS n FROM inbox").get() as { n: number };
    other.close();
    expect(count.n).toBe(3);
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["m1", "m2", "m3"]);
  });

  it("creates the session on first contact with its origin chat", async () => {
    await store.acceptInbound(inbound());
    const session = await store.getSession("agent:main:telegram:dm:42");
    expect(session?.origin).toEqual({ platform: "telegram", chatId: "42", replyToMessageId: "1" });
    expect(session?.resumePending).toBe(false);
  });

  it("keeps accepted messages across a reopen (WAL, synchronous FULL)", async () => {
    await store.acceptInbound(inbound());
    await store.close();
    const db = new Database(path);
    expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
    db.close();
    store = new SqliteStore(path, { now: () => clock });
    expect((await store.listOpenInbox()).map((i) => i.text)).toEqual(["hello"]);
  });

  it("runs a turn: user message, tool journal, final message and outbox in order", async () => {
    const { item } = await store.acceptInbound(inbound());
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: "hello" },
    });
    expect((await store.listOpenInbox())[0]?.state).toBe("running");
    const call = {
      id: "c1",
      type: "function" as const,
      function: { name: "terminal", arguments: '{"command":"ls"}' },
    };
    await store.appendMessages(turn.sessionId, turn.id, [
      { role: "assistant", content: null, tool_calls: [call] },
    ]);
    await store.recordToolStart({
      toolCallId: "c1",
      turnId: turn.id,
      sessionId: turn.sessionId,
      name: "terminal",
      arguments: "{}",
    });
    expect(await store.listUnfinishedToolCalls(turn.sessionId)).toHaveLength(1);
    await store.recordToolFinish({
      toolCallId: "c1",
      turnId: turn.id,
      sessionId: turn.sessionId,
      result: "file.txt",
    });
    expect(await store.listUnfinishedToolCalls(turn.sessionId)).toHaveLength(0);
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

  it("makes an online backup that opens and holds the sessions", async () => {
    await store.acceptInbound(inbound());
    const copy = join(dir.path, "backup.db");
    await store.backup(copy);
    const backup = new SqliteStore(copy);
    expect((await backup.listSessions()).map((s) => s.key)).toEqual(["agent:main:telegram:dm:42"]);
    await backup.close();
  });
});
