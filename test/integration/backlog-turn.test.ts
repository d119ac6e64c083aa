/**
 * A backlog is one turn: messages that waited for a chat are answered by one model call that
 * sees them all and one reply, in every busy mode for a backlog found at start, and in
 * `interrupt` mode for messages queued behind a running turn.
 */
import { describe, expect } from "vitest";
import type { FakeChatRequest, FakeStep } from "../fakes/openai-server.js";
import {
  ALLOWED_USER,
  botMessages,
  type TelegramGatewayHarness,
} from "../helpers/in-process-gateway.js";
import { telegramTest } from "../helpers/telegram-test.js";
import { waitFor } from "../helpers/wait-for.js";

type Message = FakeChatRequest["messages"][number];

function textOf(message: Message): string {
  return typeof message.content === "string" ? message.content : "";
}

/** The user texts after the model's last answer: what a call is asked to answer. */
function openUserTexts(request: FakeChatRequest): string[] {
  const messages = request.messages;
  const lastAnswer = messages.findLastIndex((m) => m.role === "assistant");
  return messages
    .slice(lastAnswer + 1)
    .filter((m) => m.role === "user")
    .map(textOf);
}

/** Answers `re <every open user text>`; a user text starting `slow` holds its call for a while. */
function answerAll(request: FakeChatRequest): FakeStep {
  const open = openUserTexts(request);
  const slow = open.some((t) => t.startsWith("slow"));
  return { text: `re ${open.join(" | ")}`, ...(slow && { delayMs: 3_000 }) };
}

/** Model calls that answered chat messages (not the title or other side calls). */
function chatCalls(requests: FakeChatRequest[]): FakeChatRequest[] {
  return requests.filter((r) => openUserTexts(r).some((t) => /^(m\d|slow)/.test(t)));
}

const replies = (h: TelegramGatewayHarness) =>
  botMessages(h.telegram, ALLOWED_USER)
    .map((r) => r.text)
    .filter((t) => t.startsWith("re "));

describe.concurrent("a backlog is one turn", () => {
  for (const mode of ["interrupt", "queue", "steer"] as const) {
    telegramTest(
      `three messages waiting at start: one call, one reply (${mode})`,
      async ({ h }) => {
        h.model.script(answerAll);
        for (const text of ["m1 first", "m2 second", "m3 third"]) {
          h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text });
        }
        await h.start({ KEEL_GATEWAY_BUSY_INPUT_MODE: mode });
        await waitFor(() => replies(h)[0], { message: "a reply" });
        await h.stop();
        expect(replies(h)).toEqual(["re m1 first | m2 second | m3 third"]);
        const calls = chatCalls(h.model.requests);
        expect(calls).toHaveLength(1);
        expect(openUserTexts(calls[0]!)).toEqual(["m1 first", "m2 second", "m3 third"]);
      },
    );
  }

  telegramTest(
    "messages queued behind a running turn in interrupt mode: one turn",
    async ({ h }) => {
      h.model.script(answerAll);
      await h.start({ KEEL_GATEWAY_BUSY_INPUT_MODE: "interrupt" });
      h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "slow start" });
      await waitFor(() => chatCalls(h.model.requests).length === 1 || null, {
        message: "the first turn's model call",
      });
      for (const text of ["m1 first", "m2 second", "m3 third"]) {
        h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text });
      }
      await waitFor(() => replies(h)[0], { message: "a reply" });
      await h.stop();
      // The running turn is interrupted (interrupt mode); the three waiting messages are one turn,
      // whose call also sees the request the interruption left unanswered.
      expect(replies(h)).toEqual(["re slow start | m1 first | m2 second | m3 third"]);
      expect(chatCalls(h.model.requests)).toHaveLength(2);
    },
  );

  telegramTest("queue mode keeps messages that came while a turn ran apart", async ({ h }) => {
    h.model.script(answerAll);
    await h.start({ KEEL_GATEWAY_BUSY_INPUT_MODE: "queue" });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "slow start" });
    await waitFor(() => chatCalls(h.model.requests).length === 1 || null, {
      message: "the first turn's model call",
    });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "m1 first" });
    h.telegram.sendUserMessage({ chatId: ALLOWED_USER, text: "m2 second" });
    await waitFor(() => (replies(h).length >= 3 ? true : null), { message: "three replies" });
    await h.stop();
    expect(replies(h)).toEqual(["re slow start", "re m1 first", "re m2 second"]);
  });
});
