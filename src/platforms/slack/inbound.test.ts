import { describe, expect, it } from "vitest";
import { type SlackMessageEvent, toSlackCandidate } from "./inbound.js";

const identity = { userId: "UBOT", botId: "BBOT" };
const dm = (extra: Partial<SlackMessageEvent> = {}): SlackMessageEvent => ({
  type: "message",
  channel: "D1",
  channel_type: "im",
  user: "U1",
  text: "hello",
  ts: "1700000000.000100",
  ...extra,
});

describe("toSlackCandidate", () => {
  it("a DM is the user's DM session, answered in place", () => {
    const c = toSlackCandidate(dm(), identity)!;
    expect(c.direct).toBe(true);
    expect(c.inbound).toMatchObject({
      platform: "slack",
      chatId: "D1",
      platformMessageId: "1700000000.000100",
      sessionKey: "agent:main:slack:dm:U1",
      text: "hello",
      senderId: "U1",
      address: { platform: "slack", chatId: "D1", replyToMessageId: "1700000000.000100" },
    });
    expect(c.inbound.address.threadId).toBeUndefined();
  });

  it("a top-level channel mention starts a thread session; a reply in it keeps the root", () => {
    const top = toSlackCandidate(
      { type: "app_mention", channel: "C1", user: "U1", text: "<@UBOT> hi", ts: "10.000001" },
      identity,
    )!;
    expect(top.mentioned).toBe(true);
    expect(top.direct).toBe(false);
    expect(top.inbound.sessionKey).toBe("agent:main:slack:thread:C1:10.000001");
    expect(top.inbound.address.threadId).toBe("10.000001");
    expect(top.inbound.text).toBe("hi");
    const reply = toSlackCandidate(
      dm({ channel: "C1", channel_type: "channel", ts: "11.000002", thread_ts: "10.000001" }),
      identity,
    )!;
    expect(reply.threadReply).toBe(true);
    expect(reply.mentioned).toBe(false);
    expect(reply.inbound.sessionKey).toBe("agent:main:slack:thread:C1:10.000001");
    expect(reply.inbound.address.threadId).toBe("10.000001");
  });

  it("the message and app_mention twins of one post map to the same inbox key", () => {
    const base = { channel: "C1", user: "U1", text: "<@UBOT> go", ts: "12.000003" };
    const a = toSlackCandidate({ ...base, type: "message", channel_type: "channel" }, identity)!;
    const b = toSlackCandidate({ ...base, type: "app_mention" }, identity)!;
    expect([a.inbound.chatId, a.inbound.platformMessageId, a.inbound.sessionKey]).toEqual([
      b.inbound.chatId,
      b.inbound.platformMessageId,
      b.inbound.sessionKey,
    ]);
    expect(a.mentioned && b.mentioned).toBe(true);
  });

  it("skips edits, deletions, bots, our own messages and empty text", () => {
    expect(toSlackCandidate(dm({ subtype: "message_changed" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ subtype: "message_deleted" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ bot_id: "B9" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ user: "UBOT" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ text: "<@UBOT>" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ type: "reaction_added" }), identity)).toBeNull();
    expect(toSlackCandidate(dm({ subtype: "file_share" }), identity)).not.toBeNull();
  });

  it("an app_mention in a D channel counts as direct", () => {
    const c = toSlackCandidate(
      { type: "app_mention", channel: "D9", user: "U1", text: "<@UBOT> x", ts: "1.1" },
      identity,
    )!;
    expect(c.direct).toBe(true);
    expect(c.inbound.sessionKey).toBe("agent:main:slack:dm:U1");
  });
});
