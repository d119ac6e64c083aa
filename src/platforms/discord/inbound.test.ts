import type { APIMessage } from "discord-api-types/v10";
import { describe, expect, it } from "vitest";
import { stripBotMention, toInboundMessage } from "./inbound.js";

const BOT = "900";
const context = { botUserId: BOT, freeChannels: new Set(["free-1"]) };

function message(over: Partial<APIMessage> & { guild_id?: string } = {}): APIMessage & {
  guild_id?: string;
} {
  return {
    id: "555",
    channel_id: "c-1",
    author: { id: "42", username: "ann", global_name: "Ann", discriminator: "0", avatar: null },
    content: "hello",
    timestamp: "",
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    embeds: [],
    pinned: false,
    type: 0,
    ...over,
  } as APIMessage & { guild_id?: string };
}

const mention = { id: BOT, username: "keel", global_name: null, discriminator: "0", avatar: null };

describe("Discord inbound", () => {
  it("a DM goes to the user's DM session and answers the message", () => {
    const inbound = toInboundMessage(message(), context, null)!;
    expect(inbound.sessionKey).toBe("agent:main:discord:dm:42");
    expect(inbound.address).toEqual({
      platform: "discord",
      chatId: "c-1",
      replyToMessageId: "555",
    });
    expect(inbound.senderName).toBe("Ann");
  });

  it("a guild message without a mention is not for Keel; with one it starts a thread session on the message", () => {
    const channel = { isThread: false, hasSession: false };
    expect(toInboundMessage(message({ guild_id: "g" }), context, channel)).toBeNull();
    const inbound = toInboundMessage(
      message({ guild_id: "g", content: `<@${BOT}> what now?`, mentions: [mention] }),
      context,
      channel,
    )!;
    expect(inbound.text).toBe("what now?");
    expect(inbound.sessionKey).toBe("agent:main:discord:thread:555");
    expect(inbound.address).toEqual({
      platform: "discord",
      chatId: "c-1",
      threadId: "555",
      replyToMessageId: "555",
    });
  });

  it("in a thread: Keel's own thread, a free parent, or a mention; the thread is the session", () => {
    const inThread = message({ guild_id: "g", channel_id: "t-9" });
    const none = { isThread: true, hasSession: false, parentId: "p" };
    expect(toInboundMessage(inThread, context, none)).toBeNull();
    const ours = toInboundMessage(inThread, context, { ...none, hasSession: true })!;
    expect(ours.sessionKey).toBe("agent:main:discord:thread:t-9");
    expect(ours.address).toEqual({ platform: "discord", chatId: "t-9", replyToMessageId: "555" });
    expect(toInboundMessage(inThread, context, { ...none, parentId: "free-1" })).not.toBeNull();
  });

  it("a free channel needs no mention", () => {
    const inbound = toInboundMessage(message({ guild_id: "g", channel_id: "free-1" }), context, {
      isThread: false,
      hasSession: false,
    });
    expect(inbound?.sessionKey).toBe("agent:main:discord:thread:555");
  });

  it("ignores bots, webhooks, system messages and a bare mention", () => {
    const author = { ...message().author, bot: true };
    expect(toInboundMessage(message({ author }), context, null)).toBeNull();
    expect(toInboundMessage(message({ webhook_id: "w" }), context, null)).toBeNull();
    expect(toInboundMessage(message({ type: 7 }), context, null)).toBeNull();
    expect(toInboundMessage(message({ content: `<@!${BOT}>` }), context, null)).toBeNull();
  });

  it("strips every mention of the bot, old and new style", () => {
    expect(stripBotMention(`<@!${BOT}> /status <@${BOT}>`, BOT)).toBe("/status");
  });
});
