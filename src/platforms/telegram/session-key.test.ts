import { describe, expect, it } from "vitest";
import { telegramReplyAddress, telegramSessionKey } from "./session-key.js";

describe("telegramSessionKey", () => {
  it("gives a private chat a dm key", () => {
    expect(telegramSessionKey({ chatType: "private", chatId: "42", userId: "42" }, false)).toBe(
      "agent:main:telegram:dm:42",
    );
  });

  it("gives a group one shared key unless sessions are per user", () => {
    const ref = { chatType: "supergroup" as const, chatId: "-100123", userId: "7" };
    expect(telegramSessionKey(ref, false)).toBe("agent:main:telegram:group:-100123");
    expect(telegramSessionKey(ref, true)).toBe("agent:main:telegram:group:-100123:user:7");
    expect(telegramSessionKey({ ...ref, chatType: "group" }, false)).toBe(
      "agent:main:telegram:group:-100123",
    );
  });

  it("gives forum topics and reply threads their own key", () => {
    const ref = { chatType: "supergroup" as const, chatId: "-100123", threadId: "7", userId: "5" };
    expect(telegramSessionKey(ref, false)).toBe("agent:main:telegram:group:-100123:7");
    expect(telegramSessionKey(ref, true)).toBe("agent:main:telegram:group:-100123:7:user:5");
  });
});

describe("telegramReplyAddress", () => {
  it("keeps the topic and answers the user's message", () => {
    expect(
      telegramReplyAddress({ chatType: "supergroup", chatId: "-100123", threadId: "7" }, "55"),
    ).toEqual({ platform: "telegram", chatId: "-100123", threadId: "7", replyToMessageId: "55" });
    expect(telegramReplyAddress({ chatType: "private", chatId: "42" }, "3")).toEqual({
      platform: "telegram",
      chatId: "42",
      replyToMessageId: "3",
    });
  });
});
