import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect } from "vitest";
import { TELEGRAM_COMMANDS } from "../../src/platforms/telegram/adapter.js";
import { ALLOWED_USER, botMessages } from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

describe.concurrent("Telegram through the real gateway", () => {
  telegramTest("answers a direct message, replying to it", async ({ h }) => {
    await h.start();
    const sent = h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: hello there" });
    const replies = await waitFor(() => {
      const bot = botMessages(h.telegram, ALLOWED_USER);
      return bot.length > 0 ? bot : null;
    });
    expect(replies.map((r) => r.text)).toEqual(["hello there"]);
    expect(replies[0]!.replyToMessageId).toBe(sent.message_id);
    await waitFor(() => h.telegram.confirmedOffset() > sent.update_id, {
      message: "offset confirmed past the message",
    });
  });

  telegramTest(
    "answers messages sent while the gateway was down once, as one turn per chat",
    async ({ h }) => {
      // Queue mode too: a chat's backlog is one turn (one model call sees every message), and
      // each chat's backlog its own.
      for (let i = 1; i <= 5; i++) {
        h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: `echo: early ${i}` });
      }
      h.telegram.sendUserMessage({ chatId: 5151, userId: ALLOWED_USER, text: "echo: other chat" });
      await h.start({ KEEL_GATEWAY_BUSY_INPUT_MODE: "queue" });
      const answers = () =>
        botMessages(h.telegram, ALLOWED_USER)
          .map((r) => r.text)
          .filter((t) => !t.startsWith("⏳"));
      await waitFor(() => answers().length >= 1, { message: "the backlog's reply" });
      await waitFor(() => botMessages(h.telegram, 5151).length >= 1, { message: "other chat" });
      // A restart afterwards must not answer any of them again.
      await h.stop();
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "echo: after restart" });
      await waitFor(() => answers().includes("after restart"), { message: "reply after restart" });
      expect(answers()).toEqual(["early 5", "after restart"]);
      expect(botMessages(h.telegram, 5151).map((r) => r.text)).toEqual(["other chat"]);
      const backlogCall = h.model.requests.find((r) =>
        r.messages.some((m) => m.content === "echo: early 5"),
      );
      const users = backlogCall?.messages.filter((m) => m.role === "user").map((m) => m.content);
      expect(users).toEqual([1, 2, 3, 4, 5].map((i) => `echo: early ${i}`));
    },
  );

  telegramTest("answers a forum topic message in that topic, replying to it", async ({ h }) => {
    await h.start();
    const group = -1001234;
    const sent = h.telegram.sendUserMessage({
      chatId: group,
      userId: ALLOWED_USER,
      threadId: 77,
      text: "echo: in the topic",
    });
    const reply = await waitFor(() => botMessages(h.telegram, group)[0]);
    expect(reply.text).toBe("in the topic");
    expect(reply.threadId).toBe(77);
    expect(reply.replyToMessageId).toBe(sent.message_id);
  });

  telegramTest("splits a 10,000-character reply into valid pieces", async ({ h }) => {
    await h.start();
    const words = Array.from({ length: 2000 }, (_, i) => `w${i % 10}rd`).join(" ");
    const long = `**Start** ${words.slice(0, 9990)}`;
    expect(long.length).toBeGreaterThanOrEqual(10_000);
    h.model.script({ text: long });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "long please" });
    await waitFor(() => {
      const text = botMessages(h.telegram, ALLOWED_USER)
        .map((r) => r.text)
        .join(" ");
      return text.replace(/\s+/g, " ").length >= long.length - 20;
    });
    const pieces = botMessages(h.telegram, ALLOWED_USER);
    expect(pieces.length).toBeGreaterThanOrEqual(3);
    for (const piece of pieces) {
      expect(piece.parseMode).toBe("HTML");
      expect(piece.text.length).toBeLessThanOrEqual(4096);
    }
    // No Telegram call was refused (the fake validates the HTML and the length).
    expect(h.telegram.sent.filter((c) => c.method === "sendMessage" && !c.ok)).toEqual([]);
    const joined = pieces.map((p) => p.text).join(" ");
    expect(joined.startsWith("Start w0rd w1rd")).toBe(true);
    // Words are never cut: every token is a whole word.
    const tokens = joined.trim().split(/\s+/);
    expect(tokens.slice(1, -1).every((t) => /^w\drd$/.test(t))).toBe(true);
    expect(pieces[0]!.replyToMessageId).toBeDefined();
  });

  telegramTest("registers the chat commands and shows typing while a turn runs", async ({ h }) => {
    await h.start();
    expect(h.telegram.commands().map((c) => c.command)).toEqual(
      TELEGRAM_COMMANDS.map((c) => c.command),
    );
    // Typing shows once a turn has run for a second (Telegram advises it only for a wait).
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "slow: 1500 done" });
    await h.telegram.waitForSent(
      (c) => c.method === "sendChatAction" && String(c.payload.chat_id) === String(ALLOWED_USER),
    );
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]?.text === "done");
  });

  telegramTest("a reply sent within a second shows no typing", async ({ h }) => {
    await h.start();
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "hello" });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER).length === 1);
    await sleep(1_200);
    expect(h.telegram.sent.filter((c) => c.method === "sendChatAction")).toHaveLength(0);
  });
});
