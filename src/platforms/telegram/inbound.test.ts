import type { Message } from "grammy/types";
import { describe, expect, it } from "vitest";
import { normalizeCommand, toInboundMessage } from "./inbound.js";

const OPTIONS = { groupSessionsPerUser: false, botUsername: "keel_bot" };

function message(fields: Record<string, unknown>): Message {
  return {
    message_id: 10,
    date: 0,
    chat: { id: -100, type: "supergroup", title: "g" },
    from: { id: 5, is_bot: false, first_name: "Ada", last_name: "L" },
    ...fields,
  } as Message;
}

describe("toInboundMessage", () => {
  it("keys a reply thread by thread id but replies without a topic id", () => {
    const inbound = toInboundMessage(message({ text: "hi", message_thread_id: 3 }), OPTIONS);
    expect(inbound).toMatchObject({
      sessionKey: "agent:main:telegram:group:-100:3",
      senderName: "Ada L",
      address: { platform: "telegram", chatId: "-100", replyToMessageId: "10" },
    });
    expect(inbound?.address.threadId).toBeUndefined();
  });

  it("keeps the topic id for forum topics", () => {
    const inbound = toInboundMessage(
      message({ text: "hi", message_thread_id: 3, is_topic_message: true }),
      OPTIONS,
    );
    expect(inbound?.address.threadId).toBe("3");
  });

  it("skips messages without text and messages from bots", () => {
    expect(toInboundMessage(message({}), OPTIONS)).toBeNull();
    expect(
      toInboundMessage(
        message({ text: "x", from: { id: 1, is_bot: true, first_name: "b" } }),
        OPTIONS,
      ),
    ).toBeNull();
  });
});

describe("normalizeCommand", () => {
  it("strips our own bot name and refuses other bots' commands", () => {
    expect(normalizeCommand("/new@Keel_Bot now", "keel_bot")).toBe("/new now");
    expect(normalizeCommand("/new@other", "keel_bot")).toBeNull();
    expect(normalizeCommand("plain @keel_bot", "keel_bot")).toBe("plain @keel_bot");
  });
});
