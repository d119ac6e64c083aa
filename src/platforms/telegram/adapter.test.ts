import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { checkTelegramHtml } from "../../../test/fakes/telegram-html.js";
import { type FakeTelegram, startFakeTelegram } from "../../../test/fakes/telegram-server.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import type {
  AcceptResult,
  InboundMessage,
  InboundSink,
  OutboundReply,
} from "../../contract/platform.js";
import type { PairingRequest } from "../../sessions/store.js";
import type { PairingAccess } from "./access.js";
import { TelegramAdapter, type TelegramAdapterOptions, type TelegramTiming } from "./adapter.js";

const TOKEN = "123456:test-token";
const OWNER = 42;

const FAST: TelegramTiming = {
  pollTimeoutSec: 1,
  pollMarginMs: 300,
  conflictRetryMs: 100,
  backoffBaseMs: 20,
  backoffMaxMs: 100,
  typingIntervalMs: 50,
  typingDelayMs: 0,
  stopTimeoutMs: 1_000,
  startWaitMs: 2_000,
  retry: { maxAttempts: 5, baseDelayMs: 10, maxDelayMs: 50, maxRetryAfterMs: 5_000 },
};

/** Records what the adapter hands over; can be told to fail or to hold the next commit. */
class RecordingSink implements InboundSink {
  readonly received: InboundMessage[] = [];
  calls = 0;
  failures = 0;
  hold: Promise<void> | null = null;

  async receive(message: InboundMessage): Promise<AcceptResult> {
    this.calls += 1;
    if (this.hold) await this.hold;
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error("disk full");
    }
    this.received.push(message);
    return { accepted: true, inboxId: this.received.length, sessionId: "session-1" };
  }
}

/** Pairing over a Map, with the store's rules that matter here (live code reuse, cap). */
function createPairing(): PairingAccess & {
  approve(code: string): void;
  requests: Map<string, PairingRequest>;
} {
  const requests = new Map<string, PairingRequest>();
  const approved = new Set<string>();
  return {
    requests,
    approve(code) {
      const request = requests.get(code);
      if (request) approved.add(request.userId);
    },
    async requestPairing(input) {
      const live = [...requests.values()].filter((r) => !approved.has(r.userId));
      const existing = live.find((r) => r.userId === input.userId);
      if (existing) return existing;
      if (live.length >= input.maxPending) return null;
      const code = `PAIR${String(requests.size + 1).padStart(4, "0")}`;
      const now = Date.now();
      const request: PairingRequest = {
        code,
        platform: input.platform,
        userId: input.userId,
        userName: input.userName,
        chatId: input.chatId,
        createdAt: now,
        expiresAt: now + input.ttlMs,
        approvedAt: null,
      };
      requests.set(code, request);
      return request;
    },
    async isUserApproved(_platform, userId) {
      return approved.has(userId);
    },
  };
}

let fake: FakeTelegram;
let adapters: TelegramAdapter[];

beforeEach(async () => {
  fake = await startFakeTelegram({ token: TOKEN });
  adapters = [];
});

afterEach(async () => {
  for (const adapter of adapters) await adapter.stop();
  await fake.close();
});

function createAdapter(overrides: Partial<TelegramAdapterOptions> = {}): TelegramAdapter {
  const adapter = new TelegramAdapter({
    token: TOKEN,
    apiRoot: fake.apiRoot,
    allowedUsers: [String(OWNER)],
    groupSessionsPerUser: false,
    pairing: createPairing(),
    logger: pino({ level: "silent" }),
    timing: FAST,
    ...overrides,
  });
  adapters.push(adapter);
  return adapter;
}

function reply(text: string, address: OutboundReply["address"], outboxId = 1): OutboundReply {
  return { outboxId, sessionKey: "k", sessionId: "s", address, text, kind: "reply" };
}

function botMessages(chatId: number, threadId?: number) {
  return fake.chatLog(chatId, threadId).filter((m) => m.from === "bot");
}

function sendCalls() {
  return fake.sent.filter((c) => c.method === "sendMessage");
}

describe("TelegramAdapter intake", () => {
  it("receives messages sent while it was not running (no backlog dropped)", async () => {
    for (const text of ["one", "two", "three"]) fake.sendUserMessage({ chatId: OWNER, text });
    const sink = new RecordingSink();
    await createAdapter().start(sink);
    await waitFor(() => sink.received.length === 3);
    expect(sink.received.map((m) => m.text)).toEqual(["one", "two", "three"]);
    expect(sink.received[0]).toMatchObject({
      platform: "telegram",
      chatId: String(OWNER),
      sessionKey: `agent:main:telegram:dm:${OWNER}`,
      senderId: String(OWNER),
      address: { platform: "telegram", chatId: String(OWNER), replyToMessageId: "1" },
    });
    const webhookCalls = fake.sent.filter((c) => c.method === "deleteWebhook");
    expect(webhookCalls.every((c) => c.payload.drop_pending_updates !== true)).toBe(true);
  });

  it("moves the offset past an update only after the sink has committed it", async () => {
    const sink = new RecordingSink();
    let release: () => void = () => {};
    sink.hold = new Promise((resolve) => {
      release = resolve;
    });
    await createAdapter().start(sink);
    const { update_id } = fake.sendUserMessage({ chatId: OWNER, text: "slow commit" });
    await waitFor(() => sink.calls === 1);
    expect(fake.confirmedOffset()).toBeLessThanOrEqual(update_id);
    expect(fake.pendingUpdates().map((u) => u.update_id)).toContain(update_id);
    sink.hold = null;
    release();
    await waitFor(() => fake.confirmedOffset() > update_id);
    expect(sink.received.map((m) => m.text)).toEqual(["slow commit"]);
  });

  it("does not confirm an update the sink failed to store: it is redelivered with the same id", async () => {
    const sink = new RecordingSink();
    sink.failures = 2;
    await createAdapter().start(sink);
    const { update_id, message_id } = fake.sendUserMessage({ chatId: OWNER, text: "keep me" });
    await waitFor(() => sink.received.length === 1);
    expect(sink.calls).toBe(3);
    expect(sink.received[0]!.platformMessageId).toBe(String(message_id));
    const polls = fake.sent.filter(
      (c) => c.method === "getUpdates" && Number(c.payload.offset) === 0,
    );
    expect(polls.length).toBeGreaterThanOrEqual(3);
    await waitFor(() => fake.confirmedOffset() > update_id);
  });

  it("gives a redelivered message the same platform message id", async () => {
    const sink = new RecordingSink();
    await createAdapter().start(sink);
    const { message_id } = fake.sendUserMessage({ chatId: OWNER, text: "again" });
    await waitFor(() => sink.received.length === 1);
    await waitFor(() => fake.pendingUpdates().length === 0);
    // Telegram may deliver an update twice (e.g. confirmation lost before a crash).
    fake.pushUpdate({
      message: {
        message_id,
        date: 0,
        chat: { id: OWNER, type: "private" },
        from: { id: OWNER, is_bot: false, first_name: "Tester" },
        text: "again",
      },
    });
    await waitFor(() => sink.received.length === 2);
    expect(sink.received[1]!.platformMessageId).toBe(sink.received[0]!.platformMessageId);
    expect(sink.received[1]!.sessionKey).toBe(sink.received[0]!.sessionKey);
  });

  it("confirms the handled offset on stop so nothing is redelivered to the next start", async () => {
    const sink = new RecordingSink();
    let release: () => void = () => {};
    sink.hold = new Promise((resolve) => {
      release = resolve;
    });
    const adapter = createAdapter();
    await adapter.start(sink);
    const { update_id } = fake.sendUserMessage({ chatId: OWNER, text: "once" });
    await waitFor(() => sink.calls === 1);
    // Stop while the commit is in flight: stop waits for it, then confirms the offset.
    const stopping = adapter.stop();
    release();
    await stopping;
    expect(adapter.status().state).toBe("stopped");
    expect(sink.received.map((m) => m.text)).toEqual(["once"]);
    expect(fake.confirmedOffset()).toBeGreaterThan(update_id);
    const next = new RecordingSink();
    await createAdapter().start(next);
    fake.sendUserMessage({ chatId: OWNER, text: "after restart" });
    await waitFor(() => next.received.length === 1);
    expect(next.received.map((m) => m.text)).toEqual(["after restart"]);
  });

  it("takes captions as text and a sticker as a marker, and ignores edits", async () => {
    const sink = new RecordingSink();
    await createAdapter().start(sink);
    const from = { id: OWNER, is_bot: false, first_name: "Tester" };
    const chat = { id: OWNER, type: "private" };
    fake.pushUpdate({
      message: { message_id: 900, date: 0, chat, from, sticker: { file_id: "x" } },
    });
    fake.pushUpdate({ edited_message: { message_id: 901, date: 0, chat, from, text: "edited" } });
    fake.pushUpdate({
      message: { message_id: 902, date: 0, chat, from, caption: "look", photo: [] },
    });
    fake.sendUserMessage({ chatId: OWNER, text: "last" });
    await waitFor(() => sink.received.some((m) => m.text === "last"));
    expect(sink.received.map((m) => m.text)).toEqual(["[sticker]", "look", "last"]);
  });

  it("strips its own @name from commands and ignores commands for other bots", async () => {
    const sink = new RecordingSink();
    await createAdapter().start(sink);
    const group = { chatId: -100500, userId: OWNER, chatType: "supergroup" as const };
    fake.sendUserMessage({ ...group, text: "/status@other_bot" });
    fake.sendUserMessage({ ...group, text: "/new@keel_test_bot please" });
    await waitFor(() => sink.received.length === 1);
    fake.sendUserMessage({ ...group, text: "sentinel" });
    await waitFor(() => sink.received.length === 2);
    expect(sink.received.map((m) => m.text)).toEqual(["/new please", "sentinel"]);
  });
});

describe("TelegramAdapter sessions and replies", () => {
  it("keys a forum topic message by thread and answers inside the topic", async () => {
    const sink = new RecordingSink();
    const adapter = createAdapter();
    await adapter.start(sink);
    const { message_id } = fake.sendUserMessage({
      chatId: -100123,
      userId: OWNER,
      chatType: "supergroup",
      threadId: 7,
      text: "in the topic",
    });
    await waitFor(() => sink.received.length === 1);
    const inbound = sink.received[0]!;
    expect(inbound.sessionKey).toBe("agent:main:telegram:group:-100123:7");
    expect(inbound.address).toEqual({
      platform: "telegram",
      chatId: "-100123",
      threadId: "7",
      replyToMessageId: String(message_id),
    });
    await adapter.deliver(reply("**done**", inbound.address));
    const [call] = sendCalls();
    expect(call!.payload).toMatchObject({
      message_thread_id: 7,
      parse_mode: "HTML",
      text: "<b>done</b>",
      reply_parameters: { message_id },
    });
    expect(botMessages(-100123, 7)).toMatchObject([{ text: "done", replyToMessageId: message_id }]);
  });

  it("gives each member their own group session when configured", async () => {
    const sink = new RecordingSink();
    await createAdapter({ groupSessionsPerUser: true, allowedUsers: ["42", "43"] }).start(sink);
    fake.sendUserMessage({ chatId: -100123, userId: 42, text: "a" });
    fake.sendUserMessage({ chatId: -100123, userId: 43, text: "b" });
    await waitFor(() => sink.received.length === 2);
    expect(sink.received.map((m) => m.sessionKey)).toEqual([
      "agent:main:telegram:group:-100123:user:42",
      "agent:main:telegram:group:-100123:user:43",
    ]);
  });

  it("delivers a 10,000-character reply as several valid pieces, replying with the first", async () => {
    const adapter = createAdapter();
    const code = Array.from({ length: 250 }, (_, k) => `print("line ${k}", a < b)`).join("\n");
    const prose = Array.from(
      { length: 120 },
      (_, k) => `Point ${k}: **important** detail & more.`,
    ).join("\n\n");
    const text = `${prose}\n\n\`\`\`python\n${code}\n\`\`\`\n\nEnd.`;
    expect(text.length).toBeGreaterThan(10_000);
    await adapter.deliver(
      reply(text, { platform: "telegram", chatId: String(OWNER), replyToMessageId: "5" }),
    );
    const calls = sendCalls();
    expect(calls.length).toBeGreaterThan(2);
    for (const [index, call] of calls.entries()) {
      expect(call.ok).toBe(true);
      const html = String(call.payload.text);
      expect(html.length).toBeLessThanOrEqual(4096);
      expect(checkTelegramHtml(html).ok).toBe(true);
      expect(call.payload.reply_parameters !== undefined).toBe(index === 0);
    }
    expect(
      botMessages(OWNER)
        .map((m) => m.text)
        .join("\n"),
    ).toContain('print("line 119", a < b)');
  });

  it("resends a piece as plain text when Telegram rejects its markup", async () => {
    const adapter = createAdapter();
    fake.failNext("sendMessage", {
      error_code: 400,
      description: 'Bad Request: can\'t parse entities: Unsupported start tag "x" at byte offset 3',
    });
    await adapter.deliver(
      reply("**bold** & <tag>", { platform: "telegram", chatId: String(OWNER) }),
    );
    const calls = sendCalls();
    expect(calls.map((c) => c.ok)).toEqual([false, true]);
    expect(calls[1]!.payload.parse_mode).toBeUndefined();
    expect(calls[1]!.payload.text).toBe("bold & <tag>");
  });

  it("waits retry_after on 429 and retries", async () => {
    const adapter = createAdapter();
    fake.failNext("sendMessage", { error_code: 429, retry_after: 1 });
    const started = Date.now();
    await adapter.deliver(reply("hello", { platform: "telegram", chatId: String(OWNER) }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(sendCalls().map((c) => c.ok)).toEqual([false, true]);
    expect(botMessages(OWNER).map((m) => m.text)).toEqual(["hello"]);
  });

  it("retries 5xx and network errors with backoff", async () => {
    const adapter = createAdapter();
    fake.failNext("sendMessage", { error_code: 502 });
    fake.dropNextConnection("sendMessage");
    fake.failNext("sendMessage", { error_code: 500 });
    await adapter.deliver(reply("persist", { platform: "telegram", chatId: String(OWNER) }));
    expect(sendCalls().map((c) => c.ok)).toEqual([false, false, false, true]);
    expect(botMessages(OWNER).map((m) => m.text)).toEqual(["persist"]);
  });

  it("throws when Telegram refuses the message or keeps failing", async () => {
    const adapter = createAdapter();
    fake.failNext("sendMessage", { error_code: 400, description: "Bad Request: chat not found" });
    await expect(
      adapter.deliver(reply("x", { platform: "telegram", chatId: "999" })),
    ).rejects.toThrow(/chat not found/);
    for (let k = 0; k < 5; k++) fake.failNext("sendMessage", { error_code: 503 });
    await expect(
      adapter.deliver(reply("y", { platform: "telegram", chatId: String(OWNER) }, 2)),
    ).rejects.toThrow(/503/);
    expect(sendCalls()).toHaveLength(6);
  });

  it("does not resend pieces already delivered when a delivery is retried", async () => {
    const adapter = createAdapter();
    const text = ["0", "1", "2"].map((digit) => digit.repeat(3000)).join("\n\n");
    const address = { platform: "telegram", chatId: String(OWNER) };
    // The first piece goes out, then the second fails on every attempt.
    fake.failNext("sendMessage", { error_code: 500, afterCalls: 1 });
    for (let k = 0; k < 4; k++) fake.failNext("sendMessage", { error_code: 500 });
    await expect(adapter.deliver(reply(text, address, 8))).rejects.toThrow(/500/);
    await adapter.deliver(reply(text, address, 8));
    expect(botMessages(OWNER).map((m) => m.text[0])).toEqual(["0", "1", "2"]);
  });
});

describe("TelegramAdapter connection trouble", () => {
  it("reports a rejected token as an error without throwing or polling", async () => {
    const adapter = createAdapter({ token: "999:wrong" });
    await adapter.start(new RecordingSink());
    await waitFor(() => adapter.status().state === "error");
    expect(adapter.status().error).toMatch(/token.*401|401.*token/i);
    expect(fake.sent.filter((c) => c.method === "getUpdates")).toHaveLength(0);
  });

  it("reports another poller (409) and takes over once it is gone", async () => {
    const other = new AbortController();
    const competing = fetch(`${fake.apiRoot}/bot${TOKEN}/getUpdates?timeout=30`, {
      signal: other.signal,
    }).catch(() => null);
    await waitFor(() => fake.sent.some((c) => c.method === "getUpdates"));
    const sink = new RecordingSink();
    const adapter = createAdapter();
    await adapter.start(sink);
    await waitFor(() => adapter.status().state === "error");
    expect(adapter.status().error).toMatch(/409/);
    other.abort();
    await competing;
    fake.sendUserMessage({ chatId: OWNER, text: "mine now" });
    await waitFor(() => sink.received.length === 1);
    expect(adapter.status()).toEqual({ state: "connected", error: null });
  });

  it("gives up on a long poll that never answers and polls again: the message is taken once", async () => {
    const sink = new RecordingSink();
    const adapter = createAdapter();
    await adapter.start(sink);
    fake.sendUserMessage({ chatId: OWNER, text: "before the stall" });
    await waitFor(() => sink.received.length === 1);
    // The next long poll is held open forever, like a half-open connection.
    fake.hangNext("getUpdates");
    await waitFor(() => fake.sent.some((c) => c.method === "getUpdates" && !c.ok));
    const during = fake.sendUserMessage({ chatId: OWNER, text: "during the stall" });
    await waitFor(() => sink.received.length === 2, { message: "taken after the re-opened poll" });
    // Confirmed past it, and answered by later polls without a second hand-over.
    await waitFor(() => fake.confirmedOffset() > during.update_id);
    await waitFor(() => adapter.connection().state === "connected");
    expect(sink.received.map((m) => m.text)).toEqual(["before the stall", "during the stall"]);
  });

  it("retries when the network fails at start and then connects", async () => {
    fake.dropNextConnection("getMe");
    fake.failNext("getMe", { error_code: 502 });
    fake.sendUserMessage({ chatId: OWNER, text: "waiting" });
    const sink = new RecordingSink();
    const adapter = createAdapter();
    await adapter.start(sink);
    await waitFor(() => sink.received.length === 1);
    expect(adapter.status().state).toBe("connected");
  });

  it("registers Keel's chat commands", async () => {
    await createAdapter().start(new RecordingSink());
    await waitFor(() => fake.commands().length > 0);
    expect(fake.commands().map((c) => c.command)).toEqual([
      "new",
      "stop",
      "retry",
      "restart",
      "status",
      "help",
      "sethome",
      "approve",
      "deny",
    ]);
  });

  it("stops within its bound even when the server hangs", async () => {
    const sink = new RecordingSink();
    let release: () => void = () => {};
    sink.hold = new Promise((resolve) => {
      release = resolve;
    });
    // The hung poll is not given up on during this test: only stop() ends it.
    const adapter = createAdapter({ timing: { ...FAST, pollMarginMs: 60_000 } });
    await adapter.start(sink);
    fake.sendUserMessage({ chatId: OWNER, text: "before the hang" });
    await waitFor(() => sink.calls === 1);
    // The next poll and the confirming call on stop are never answered.
    fake.hangNext("getUpdates");
    fake.hangNext("getUpdates");
    sink.hold = null;
    release();
    await waitFor(() => fake.sent.filter((c) => c.method === "getUpdates" && !c.ok).length === 1);
    const stopped = adapter.stop().then(() => "stopped");
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise((resolve) => {
      timer = setTimeout(() => resolve("hung"), 10_000);
    });
    expect(await Promise.race([stopped, deadline])).toBe("stopped");
    clearTimeout(timer);
    expect(fake.sent.filter((c) => c.method === "getUpdates" && !c.ok)).toHaveLength(2);
  });
});

describe("TelegramAdapter access", () => {
  it("answers a stranger in a DM with a pairing code and lets them in once approved", async () => {
    const pairing = createPairing();
    const sink = new RecordingSink();
    await createAdapter({ allowedUsers: [], pairing }).start(sink);
    fake.sendUserMessage({ chatId: 555, text: "hello?" });
    await waitFor(() => botMessages(555).length === 1);
    const [request] = [...pairing.requests.values()];
    expect(request).toMatchObject({ platform: "telegram", userId: "555", chatId: "555" });
    expect(botMessages(555)[0]!.text).toContain(`keel pairing approve ${request!.code}`);
    expect(sink.received).toHaveLength(0);
    pairing.approve(request!.code);
    fake.sendUserMessage({ chatId: 555, text: "let me in" });
    await waitFor(() => sink.received.length === 1);
    expect(sink.received[0]!.text).toBe("let me in");
  });

  it("tells a stranger when too many pairing requests are pending", async () => {
    const pairing = createPairing();
    await createAdapter({ allowedUsers: [], pairing }).start(new RecordingSink());
    for (const chatId of [601, 602, 603, 604]) fake.sendUserMessage({ chatId, text: "hi" });
    await waitFor(() => botMessages(604).length === 1);
    expect(botMessages(604)[0]!.text).toMatch(/too many pending/i);
    expect(pairing.requests.size).toBe(3);
  });

  it("ignores strangers in groups silently", async () => {
    const sink = new RecordingSink();
    await createAdapter().start(sink);
    fake.sendUserMessage({ chatId: -100777, userId: 999, text: "who are you" });
    fake.sendUserMessage({ chatId: -100777, userId: OWNER, text: "owner here" });
    await waitFor(() => sink.received.length === 1);
    expect(sink.received[0]!.text).toBe("owner here");
    expect(sendCalls()).toHaveLength(0);
  });
});

describe("TelegramAdapter typing", () => {
  it("shows no typing for a turn answered within the delay", async () => {
    const adapter = createAdapter({ timing: { ...FAST, typingDelayMs: 300 } });
    const stopTyping = adapter.showTyping({ platform: "telegram", chatId: "-100123" });
    await sleep(100);
    stopTyping();
    await sleep(400);
    expect(fake.sent.filter((c) => c.method === "sendChatAction")).toHaveLength(0);
  });

  it("sends typing once the delay has passed and repeatedly until stopped", async () => {
    const adapter = createAdapter();
    const stopTyping = adapter.showTyping({
      platform: "telegram",
      chatId: "-100123",
      threadId: "7",
    });
    await waitFor(() => fake.sent.filter((c) => c.method === "sendChatAction").length >= 2);
    stopTyping();
    const action = fake.sent.find((c) => c.method === "sendChatAction")!;
    expect(action.payload).toMatchObject({
      chat_id: "-100123",
      action: "typing",
      message_thread_id: 7,
    });
  });
});
