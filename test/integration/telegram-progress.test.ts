/**
 * Progress people can see on Telegram, through the real gateway, the fake Bot API server and a
 * fake model that streams slowly: the reply shows while it is written (edited in place, at the
 * chat's pace, honouring 429), continues in new messages past 4096 characters, tool lines show
 * while tools run, and the final reply is the streamed message, once.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect } from "vitest";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { markdownToTelegramHtml, splitMessage } from "../../src/platforms/telegram/format.js";
import type { SentCall } from "../fakes/telegram-server.js";
import {
  ALLOWED_USER,
  botMessages,
  type TelegramGatewayHarness,
} from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

/** A reply of `count` sentences, streamed one piece at a time. */
function sentences(count: number): string {
  return Array.from({ length: count }, (_, i) => `Sentence number ${i + 1} is here.`).join(" ");
}

function writesTo(calls: SentCall[], method: string, chatId = ALLOWED_USER): SentCall[] {
  return calls.filter(
    (c) => c.method === method && c.ok && String(c.payload.chat_id) === String(chatId),
  );
}

/** Bot calls that change what the chat shows (sends, edits, deletions), in order. */
function chatWrites(calls: SentCall[], chatId = ALLOWED_USER): SentCall[] {
  return calls.filter(
    (c) =>
      ["sendMessage", "editMessageText", "deleteMessage"].includes(c.method) &&
      String(c.payload.chat_id) === String(chatId),
  );
}

const display = (h: TelegramGatewayHarness, yaml: string) =>
  writeFileSync(join(h.home, "config.yaml"), yaml);

describe.concurrent("Telegram progress", () => {
  telegramTest(
    "shows the reply long before it ends, edited in place at most once a second",
    async ({ h }) => {
      const reply = sentences(40);
      h.model.script({ text: reply, chunkDelayMs: 60 });
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write a lot" });
      // Visible while the model is still writing: the message shows only a part of the reply.
      const early = await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]);
      expect(reply.startsWith(early.text)).toBe(true);
      expect(early.text.length).toBeLessThan(reply.length);
      const final = await waitFor(
        () => {
          const [message] = botMessages(h.telegram, ALLOWED_USER);
          return message?.text === reply ? message : null;
        },
        { timeoutMs: 30_000 },
      );
      expect(botMessages(h.telegram, ALLOWED_USER)).toHaveLength(1);
      expect(final.earlier.length).toBeGreaterThanOrEqual(2);
      // Every earlier text was a prefix of the reply: it grew, and was never replaced.
      for (const text of final.earlier) expect(reply.startsWith(text)).toBe(true);
      const writes = chatWrites(h.telegram.sent);
      expect(writes.filter((c) => c.method === "sendMessage")).toHaveLength(1);
      for (let i = 1; i < writes.length; i++) {
        expect(writes[i]!.at - writes[i - 1]!.at).toBeGreaterThanOrEqual(990);
      }
    },
  );

  telegramTest("waits out a 429 on an edit, without a replacement message", async ({ h }) => {
    const reply = sentences(40);
    h.model.script({ text: reply, chunkDelayMs: 60 });
    h.telegram.failNext("editMessageText", { error_code: 429, retry_after: 3 });
    await h.start();
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write a lot" });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]?.text === reply, {
      timeoutMs: 30_000,
    });
    const edits = h.telegram.sent.filter((c) => c.method === "editMessageText");
    const refused = edits.findIndex((c) => c.errorCode === 429);
    expect(refused).toBeGreaterThanOrEqual(0);
    const next = edits[refused + 1];
    expect(next).toBeDefined();
    expect(next!.at - edits[refused]!.at).toBeGreaterThanOrEqual(2990);
    expect(writesTo(h.telegram.sent, "sendMessage")).toHaveLength(1);
    expect(botMessages(h.telegram, ALLOWED_USER)).toHaveLength(1);
  });

  telegramTest(
    "ends a 10,000-character streamed reply as valid pieces, none repeated",
    async ({ h }) => {
      const words = Array.from({ length: 2200 }, (_, i) => `w${i % 10}rd`).join(" ");
      const reply = words.slice(0, 10_400);
      h.model.script({ text: reply, chunkDelayMs: 40 });
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write even more" });
      const expected = splitMessage(markdownToTelegramHtml(reply));
      expect(expected.length).toBeGreaterThanOrEqual(3);
      const messages = await waitFor(
        () => {
          const bot = botMessages(h.telegram, ALLOWED_USER);
          const done =
            bot.length === expected.length && bot.every((m, i) => m.rawText === expected[i]);
          return done ? bot : null;
        },
        { timeoutMs: 30_000 },
      );
      for (const message of messages) expect(message.text.length).toBeLessThanOrEqual(4096);
      expect(messages.map((m) => m.text).join(" ")).toBe(reply);
    },
  );

  telegramTest(
    "shows a line per tool call while tools run, gone once the reply is final",
    async ({ h }) => {
      h.model.script([
        { toolCalls: [{ name: "terminal", arguments: { command: "sleep 1.5; echo hi" } }] },
        { text: "The command said hi." },
      ]);
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "run it" });
      const during = await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]);
      expect(during.text).toBe("⚙️ terminal: `sleep 1.5; echo hi`");
      await waitFor(
        () => botMessages(h.telegram, ALLOWED_USER)[0]?.text === "The command said hi.",
      );
      expect(botMessages(h.telegram, ALLOWED_USER)).toHaveLength(1);
    },
  );

  telegramTest("verbose tool progress adds the output's tail", async ({ h }) => {
    display(h, "display:\n  tool_progress: verbose\n");
    h.model.script([
      { toolCalls: [{ name: "terminal", arguments: { command: "echo first; echo last" } }] },
      { text: "slow answer", delayMs: 1500 },
    ]);
    await h.start();
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "run it" });
    // The tail is a passing state (the final answer replaces it), so it is read from what the bot
    // sent, not from what the chat shows now; a whole turn with a sandboxed command gets the
    // file's turn budget, as a loaded machine needs.
    const showsTail = (call: SentCall) =>
      call.ok &&
      (call.method === "sendMessage" || call.method === "editMessageText") &&
      String(call.payload.text ?? "").includes("↳ first ⏎ last");
    await waitFor(() => h.telegram.sent.some(showsTail), { timeoutMs: 30_000 });
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]?.text === "slow answer", {
      timeoutMs: 30_000,
    });
  });

  telegramTest("a stop keeps the streamed text and says it was interrupted", async ({ h }) => {
    h.model.script({ text: sentences(60), chunkDelayMs: 150 });
    await h.start();
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write a lot" });
    const shown = await waitFor(() => {
      const [message] = botMessages(h.telegram, ALLOWED_USER);
      return message && message.text.length > 40 ? message : null;
    });
    const seen = shown.text;
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "/stop" });
    const cut = await waitFor(() => {
      const [message] = botMessages(h.telegram, ALLOWED_USER);
      return message?.text.endsWith(INTERRUPTED_MARK.trim()) ? message : null;
    });
    expect(cut.text.startsWith(seen)).toBe(true);
    await waitFor(() => botMessages(h.telegram, ALLOWED_USER).some((m) => m.text === "⏹ Stopped."));
  });

  telegramTest("paces a group chat at one call every 3 seconds", async ({ h }) => {
    const group = -100_777;
    const reply = sentences(30);
    h.model.script({ text: reply, chunkDelayMs: 80 });
    await h.start();
    h.telegram.sendUserMessage({ chatId: group, userId: ALLOWED_USER, text: "write a lot" });
    await waitFor(() => botMessages(h.telegram, group)[0]?.text === reply, { timeoutMs: 40_000 });
    const writes = chatWrites(h.telegram.sent, group);
    expect(writes.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < writes.length; i++) {
      expect(writes[i]!.at - writes[i - 1]!.at).toBeGreaterThanOrEqual(2990);
    }
  });

  telegramTest(
    "a failed turn's preview says it was cut off, and the error follows as its own message",
    async ({ h }) => {
      display(h, "model:\n  timeout_seconds: 2.5\n");
      h.model.script({ text: sentences(60), chunkDelayMs: 150 });
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write a lot" });
      const bot = await waitFor(
        () => {
          const messages = botMessages(h.telegram, ALLOWED_USER);
          return messages.length === 2 ? messages : null;
        },
        { timeoutMs: 15_000 },
      );
      expect(bot[0]!.text.startsWith("Sentence number 1 is here.")).toBe(true);
      expect(bot[0]!.text.endsWith(INTERRUPTED_MARK.trim())).toBe(true);
      expect(bot[1]!.text).toMatch(/did not answer in time/);
    },
  );

  telegramTest(
    "with display.streaming false, the reply comes as one message at the end",
    async ({ h }) => {
      display(h, "display:\n  streaming: false\n  tool_progress: off\n");
      const reply = sentences(20);
      h.model.script({ text: reply, chunkDelayMs: 25 });
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "write" });
      await waitFor(() => botMessages(h.telegram, ALLOWED_USER)[0]?.text === reply);
      expect(writesTo(h.telegram.sent, "sendMessage")).toHaveLength(1);
      expect(h.telegram.sent.filter((c) => c.method === "editMessageText")).toHaveLength(0);
    },
  );

  telegramTest(
    "with display.streaming false, tool lines show in a status message removed at the end",
    async ({ h }) => {
      display(h, "display:\n  streaming: false\n");
      h.model.script([
        { toolCalls: [{ name: "read_file", arguments: { path: "notes.md" } }] },
        { text: "Read it.", delayMs: 1500 },
      ]);
      await h.start();
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "read" });
      await waitFor(() =>
        botMessages(h.telegram, ALLOWED_USER)[0]?.text === "📄 read_file: `notes.md`" ? true : null,
      );
      await waitFor(() => {
        const bot = botMessages(h.telegram, ALLOWED_USER);
        return bot.length === 1 && bot[0]!.text === "Read it.";
      });
      expect(writesTo(h.telegram.sent, "deleteMessage")).toHaveLength(1);
    },
  );
});
