/** The store contract for media, on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { InboundMessage } from "../contract/platform.js";
import type { Store } from "./store.js";

const ADDRESS = { platform: "telegram", chatId: "42", replyToMessageId: "7" };

function photoMessage(): InboundMessage {
  return {
    platform: "telegram",
    chatId: "42",
    platformMessageId: "7",
    sessionKey: "agent:main:telegram:dm:42",
    text: "look",
    address: ADDRESS,
    attachments: [{ kind: "photo", ref: "AgAD", name: "photo-7.jpg", mime: "image/jpeg", size: 9 }],
  };
}

describe.each(storeHarnesses())("the $name store: media", (harness) => {
  let store: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 1_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("keeps a message's file references with the inbox row", async () => {
    await store.acceptInbound(photoMessage());
    const [item] = await store.listOpenInbox();
    expect(item!.attachments).toEqual(photoMessage().attachments);
  });

  it("records a media step once, with its notice queued once in the same transaction", async () => {
    const { item } = await store.acceptInbound(photoMessage());
    const step = { inboxId: item.id, step: "download:0", notice: "too large" };
    expect(await store.recordMediaStep({ ...step, result: { ok: false } })).toBe(true);
    expect(await store.recordMediaStep({ ...step, result: { ok: true } })).toBe(false);
    expect(await store.listMediaSteps(item.id)).toEqual({ "download:0": { ok: false } });
    const pending = await store.listPendingOutbox();
    expect(pending.map((o) => [o.text, o.kind, o.address])).toEqual([
      ["too large", "notice", ADDRESS],
    ]);
  });

  it("gives a once-per-session notice once, and again in a fresh transcript", async () => {
    const { item } = await store.acceptInbound(photoMessage());
    const notice = {
      sessionKey: item.sessionKey,
      name: "no_vision",
      address: ADDRESS,
      text: "cannot see images",
    };
    expect(await store.enqueueNoticeOnce({ ...notice, sessionId: item.sessionId })).not.toBeNull();
    expect(await store.enqueueNoticeOnce({ ...notice, sessionId: item.sessionId })).toBeNull();
    const fresh = await store.resetSession(item.sessionKey);
    expect(await store.enqueueNoticeOnce({ ...notice, sessionId: fresh.sessionId })).not.toBeNull();
    expect((await store.listPendingOutbox()).map((o) => o.text)).toEqual([
      "cannot see images",
      "cannot see images",
    ]);
  });

  it("queues a sent file with the tool's result, and serves it by id", async () => {
    const { item } = await store.acceptInbound(photoMessage());
    const turn = await store.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: "send it" },
    });
    await store.recordToolStart({
      toolCallId: "c1",
      turnId: turn.id,
      sessionId: turn.sessionId,
      name: "send_file",
      arguments: "{}",
    });
    const file = { id: "f-1", path: "/x/f-1", name: "a.png", mime: "image/png", size: 3 };
    await store.recordToolFinish({
      toolCallId: "c1",
      sessionId: turn.sessionId,
      turnId: turn.id,
      result: "queued",
      sentFile: { file, caption: "cap", sessionKey: item.sessionKey, address: ADDRESS },
    });
    const [row] = await store.listPendingOutbox();
    expect(row).toMatchObject({ text: "cap", kind: "reply", file, turnId: turn.id });
    expect((await store.loadTurnHistory(turn.sessionId)).unfinished).toEqual([]);
    expect(await store.getSentFile("f-1")).toMatchObject({ ...file, sessionKey: item.sessionKey });
    expect(await store.getSentFile("nope")).toBeNull();
    await store.markDelivered(row!.id);
    expect(await store.listPendingOutbox()).toEqual([]);
  });
});
