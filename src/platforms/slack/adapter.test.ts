import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BOT_USER_ID, type FakeSlack, startFakeSlack } from "../../../test/fakes/slack-server.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import type { AcceptResult, InboundMessage, InboundSink } from "../../contract/platform.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { SlackAdapter, type SlackAdapterOptions, type SlackTiming } from "./adapter.js";
import { OUTBOX_EVENT_TYPE } from "./send.js";

const OWNER = "UOWNER";

const FAST: Partial<SlackTiming> = {
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  stopTimeoutMs: 1_000,
  startWaitMs: 5_000,
  requestTimeoutMs: 5_000,
  // Generous: a loaded machine can take longer than a short wait to say hello on a working socket.
  helloTimeoutMs: 5_000,
  retry: { maxAttempts: 5, maxRetryAfterMs: 5_000, maxLookbackPages: 5, lookbackMarginMs: 60_000 },
};

/** Records what the adapter hands over; can be told to fail or to hold the next commits. */
class RecordingSink implements InboundSink {
  readonly received: InboundMessage[] = [];
  private readonly keys = new Set<string>();
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
    // The inbox's key: platform + chat + message id.
    const key = `${message.chatId}/${message.platformMessageId}`;
    const accepted = !this.keys.has(key);
    if (accepted) {
      this.keys.add(key);
      this.received.push(message);
    }
    return { accepted, inboxId: this.received.length, sessionId: "s" };
  }
}

describe("SlackAdapter against a stand-in Slack", () => {
  let slack: FakeSlack;
  let home: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let sink: RecordingSink;
  let adapter: SlackAdapter | null = null;

  beforeEach(async () => {
    slack = await startFakeSlack();
    home = createTempDir("keel-slack-adapter-");
    store = new SqliteStore(join(home.path, "state.db"));
    sink = new RecordingSink();
  });

  afterEach(async () => {
    await adapter?.stop();
    adapter = null;
    await slack.close();
    await store.close();
    home.cleanup();
  });

  async function start(extra: Partial<SlackAdapterOptions> = {}): Promise<SlackAdapter> {
    adapter = new SlackAdapter({
      appToken: slack.appToken,
      botToken: slack.botToken,
      apiRoot: slack.apiRoot,
      allowedUsers: [OWNER],
      adminUsers: [],
      store,
      logger: pino({ level: "silent" }),
      timing: FAST,
      ...extra,
    });
    await adapter.start(sink);
    expect(adapter.status()).toEqual({ state: "connected", error: null });
    return adapter;
  }

  it("acknowledges an envelope only after the sink committed its message", async () => {
    await start();
    let release!: () => void;
    sink.hold = new Promise((resolve) => (release = resolve));
    slack.userPosts({ channel: "D1", user: OWNER, text: "hello" });
    await waitFor(() => sink.calls === 1, { message: "handed to the sink" });
    expect(slack.envelopes[0]!.acked).toBe(false);
    release();
    await waitFor(() => slack.envelopes[0]!.acked, { message: "acked after the commit" });
    expect(sink.received.map((m) => m.text)).toEqual(["hello"]);
  });

  it("leaves an envelope unacknowledged when storing fails; Slack's redelivery is stored once", async () => {
    await start();
    sink.failures = 1;
    slack.userPosts({ channel: "D1", user: OWNER, text: "keep me" });
    await waitFor(() => sink.calls === 1, { message: "first attempt" });
    // Give the adapter every chance to ack by mistake: a later message in the same channel is
    // taken after it, so once that one is acked the first was decided.
    slack.userPosts({ channel: "D1", user: OWNER, text: "next" });
    await waitFor(() => slack.envelopes[1]!.acked, { message: "second acked" });
    expect(slack.envelopes[0]!.acked).toBe(false);
    slack.redeliverUnacked();
    await waitFor(() => slack.envelopes[0]!.acked, { message: "redelivery acked" });
    expect(slack.envelopes[0]!.deliveries).toBe(2);
    expect(sink.received.map((m) => m.text)).toEqual(["next", "keep me"]);
  });

  it("the message and app_mention twins of one post reach the inbox as one row", async () => {
    await start();
    const ts = slack.userPosts({ channel: "C1", user: OWNER, text: `<@${BOT_USER_ID}> do it` });
    await waitFor(() => slack.envelopes.length === 2 && slack.envelopes.every((e) => e.acked), {
      message: "both twins acked",
    });
    expect(slack.envelopes.map((e) => e.event.type)).toEqual(["message", "app_mention"]);
    expect(sink.calls).toBe(2);
    expect(sink.received).toHaveLength(1);
    expect(sink.received[0]).toMatchObject({
      text: "do it",
      sessionKey: `agent:main:slack:thread:C1:${ts}`,
      address: { chatId: "C1", threadId: ts },
    });
  });

  it("in channels answers mentions and threads it is part of; ignores the rest (acked)", async () => {
    await start();
    slack.userPosts({ channel: "C1", user: OWNER, text: "just chatting" });
    const root = slack.userPosts({ channel: "C1", user: OWNER, text: "another topic" });
    slack.userPosts({ channel: "C1", user: OWNER, text: "reply, no session", threadTs: root });
    await waitFor(() => slack.envelopes.length === 3 && slack.envelopes.every((e) => e.acked));
    expect(sink.calls).toBe(0);
    await store.ensureSession(`agent:main:slack:thread:C1:${root}`, null);
    slack.userPosts({ channel: "C1", user: OWNER, text: "reply in our thread", threadTs: root });
    await waitFor(() => sink.received.length === 1, { message: "thread reply taken" });
    expect(sink.received[0]!.address.threadId).toBe(root);
  });

  it("ignores its own posts and edits, and marks admin users as operators", async () => {
    await start({ adminUsers: ["UADMIN"] });
    slack.sendEvent({
      type: "message",
      channel: "D1",
      channel_type: "im",
      user: BOT_USER_ID,
      text: "mine",
      ts: "1.000001",
      bot_id: "BKEELBOT",
    });
    slack.sendEvent({
      type: "message",
      subtype: "message_changed",
      channel: "D1",
      channel_type: "im",
      ts: "1.000002",
    });
    slack.userPosts({ channel: "D2", user: "UADMIN", text: "!restart" });
    await waitFor(() => slack.envelopes.length === 3 && slack.envelopes.every((e) => e.acked));
    expect(sink.received).toHaveLength(1);
    expect(sink.received[0]).toMatchObject({ text: "/restart", operator: true });
  });

  it("answers a stranger's DM with a pairing code, and ignores strangers in channels", async () => {
    await start();
    slack.userPosts({ channel: "D7", user: "USTRANGER", text: "hi" });
    slack.userPosts({ channel: "C1", user: "USTRANGER", text: `<@${BOT_USER_ID}> hi` });
    await waitFor(() => slack.envelopes.length === 3 && slack.envelopes.every((e) => e.acked));
    expect(sink.calls).toBe(0);
    const [pending] = await store.listPairingRequests("slack");
    expect(pending).toMatchObject({ userId: "USTRANGER", chatId: "D7" });
    expect(
      slack
        .botMessages("D7")
        .map((m) => m.text)
        .join("\n"),
    ).toContain(pending!.code);
    expect(slack.botMessages("C1")).toHaveLength(0);
  });

  it("reconnects through a fresh apps.connections.open after a refresh request and a dropped socket", async () => {
    await start();
    slack.requestRefresh();
    await waitFor(() => slack.connectionsOpened() === 2 && slack.openConnections() === 1, {
      message: "reconnected after refresh",
    });
    slack.dropSockets();
    await waitFor(() => slack.connectionsOpened() === 3 && slack.openConnections() === 1, {
      message: "reconnected after a 1006",
    });
    slack.userPosts({ channel: "D1", user: OWNER, text: "still there?" });
    await waitFor(() => sink.received.length === 1);
    const opens = slack.calls.filter((c) => c.method === "apps.connections.open");
    expect(opens).toHaveLength(3);
    expect(adapter!.status().state).toBe("connected");
  });

  it("closes a socket that stops answering pings and takes the message sent meanwhile once", async () => {
    const states: string[] = [];
    await start({
      timing: { ...FAST, clientPingTimeoutMs: 600 },
      onStatusChange: (status) => states.push(status.state),
    });
    slack.userPosts({ channel: "D1", user: OWNER, text: "before" });
    await waitFor(() => sink.received.length === 1);
    slack.stall();
    slack.userPosts({ channel: "D1", user: OWNER, text: "during the stall" });
    await waitFor(() => sink.received.length === 2, {
      message: "taken on a new socket",
      timeoutMs: 10_000,
    });
    await waitFor(() => slack.envelopes.every((e) => e.acked), { message: "all acknowledged" });
    expect(slack.connectionsOpened()).toBe(2);
    expect(sink.received.map((m) => m.text)).toEqual(["before", "during the stall"]);
    // Between the two sockets it said so, rather than "connected" with no socket.
    expect(states).toEqual(["starting", "connected", "starting", "connected"]);
    expect(adapter!.status().state).toBe("connected");
  });

  it("reports a rejected token as an error and does not loop", async () => {
    adapter = new SlackAdapter({
      appToken: slack.appToken,
      botToken: "xoxb-wrong",
      apiRoot: slack.apiRoot,
      allowedUsers: [],
      adminUsers: [],
      store,
      logger: pino({ level: "silent" }),
      timing: FAST,
    });
    await adapter.start(sink);
    expect(adapter.status().state).toBe("error");
    expect(adapter.status().error).toContain("invalid_auth");
    expect(slack.calls.filter((c) => c.method === "auth.test")).toHaveLength(1);
  });

  it("posts replies in the thread, split beyond 40,000 characters, each piece marked", async () => {
    await start();
    const text = `${"a line of text\n".repeat(3000)}end`;
    await adapter!.deliver({
      outboxId: 7,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "C1", threadId: "5.000001" },
      text,
      kind: "reply",
      createdAt: Date.now(),
    });
    const posted = slack.botMessages("C1", "5.000001");
    expect(posted).toHaveLength(2);
    expect(posted.map((m) => m.text).join("")).toBe(text);
    expect(posted.map((m) => m.metadata)).toEqual([
      { event_type: OUTBOX_EVENT_TYPE, event_payload: { outbox_id: 7, piece: 0 } },
      { event_type: OUTBOX_EVENT_TYPE, event_payload: { outbox_id: 7, piece: 1 } },
    ]);
  });

  it("a 429 on chat.postMessage waits its Retry-After and posts once", async () => {
    await start();
    slack.fail("chat.postMessage", { kind: "rate_limited", retryAfter: 1 });
    const reply = {
      outboxId: 8,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "D1" },
      text: "after the limit",
      kind: "reply" as const,
      createdAt: Date.now(),
    };
    const began = Date.now();
    await adapter!.deliver(reply);
    expect(Date.now() - began).toBeGreaterThanOrEqual(900);
    expect(
      slack.calls.filter((c) => c.method === "chat.postMessage").map((c) => c.outcome),
    ).toEqual(["rate_limited", "ok"]);
    expect(slack.botMessages("D1").map((m) => m.text)).toEqual(["after the limit"]);
  });

  it("a post whose answer was lost is looked up before the retry and not posted twice", async () => {
    await start();
    slack.fail("chat.postMessage", { kind: "drop_after" });
    const reply = {
      outboxId: 9,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "D1" },
      text: "only once",
      kind: "reply" as const,
      createdAt: Date.now(),
    };
    await expect(adapter!.deliver(reply)).rejects.toThrow(/network error/);
    // Slack has the message; the outbox retries the row.
    expect(slack.botMessages("D1")).toHaveLength(1);
    await adapter!.deliver(reply);
    expect(slack.botMessages("D1").map((m) => m.text)).toEqual(["only once"]);
    expect(slack.calls.map((c) => c.method).filter((m) => m.startsWith("conversations"))).toEqual([
      "conversations.history",
    ]);
  });

  it("a row queued before this process started is looked up first; one never sent is posted", async () => {
    // The previous process posted row 11 and died before marking it delivered; row 12 it never sent.
    const createdAt = Date.now() - 1_000;
    await start({ now: () => Date.now() });
    await adapter!.deliver({
      outboxId: 11,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "C1", threadId: "9.000001" },
      text: "posted before the crash",
      kind: "reply",
      createdAt: Date.now(),
    });
    await adapter!.stop();
    await start();
    const row = (outboxId: number, text: string) => ({
      outboxId,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "C1", threadId: "9.000001" },
      text,
      kind: "reply" as const,
      createdAt,
    });
    await adapter!.deliver(row(11, "posted before the crash"));
    await adapter!.deliver(row(12, "never sent"));
    expect(slack.botMessages("C1", "9.000001").map((m) => m.text)).toEqual([
      "posted before the crash",
      "never sent",
    ]);
    expect(slack.calls.filter((c) => c.method === "conversations.replies")).toHaveLength(2);
  });

  it("posts an uncertain row anyway when Slack refuses the read-back (missing history scope)", async () => {
    await start();
    slack.fail("conversations.history", { kind: "error", error: "missing_scope" });
    await adapter!.deliver({
      outboxId: 13,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "D1" },
      text: "still delivered",
      kind: "reply",
      createdAt: Date.now() - 60_000,
    });
    expect(slack.botMessages("D1").map((m) => m.text)).toEqual(["still delivered"]);
  });

  it("does not post an uncertain row while the read-back itself fails on the network", async () => {
    await start();
    slack.fail("conversations.history", { kind: "drop_before" });
    const reply = {
      outboxId: 14,
      sessionKey: "k",
      sessionId: "s",
      address: { platform: "slack", chatId: "D1" },
      text: "checked first",
      kind: "reply" as const,
      createdAt: Date.now() - 60_000,
    };
    await expect(adapter!.deliver(reply)).rejects.toThrow();
    expect(slack.botMessages("D1")).toHaveLength(0);
    await adapter!.deliver(reply);
    expect(slack.botMessages("D1").map((m) => m.text)).toEqual(["checked first"]);
  });

  it("a socket that never says hello is closed and replaced", async () => {
    slack.greetWith("nothing");
    adapter = new SlackAdapter({
      appToken: slack.appToken,
      botToken: slack.botToken,
      apiRoot: slack.apiRoot,
      allowedUsers: [OWNER],
      adminUsers: [],
      store,
      logger: pino({ level: "silent" }),
      // Short here only: this socket never says hello, so no load can make the wait pass.
      timing: { ...FAST, helloTimeoutMs: 300 },
    });
    await adapter.start(sink);
    expect(adapter.status().state).toBe("error");
    expect(adapter.status().error).toContain("no hello");
    slack.greetWith("hello");
    await waitFor(() => adapter!.status().state === "connected", { message: "reconnected" });
    slack.userPosts({ channel: "D1", user: OWNER, text: "after hello" });
    await waitFor(() => sink.received.length === 1);
  });

  it("with one token missing it reports which, and connects nowhere", async () => {
    adapter = new SlackAdapter({
      appToken: undefined,
      botToken: slack.botToken,
      apiRoot: slack.apiRoot,
      allowedUsers: [],
      adminUsers: [],
      store,
      logger: pino({ level: "silent" }),
      timing: FAST,
    });
    await adapter.start(sink);
    expect(adapter.status()).toEqual({
      state: "error",
      error: "platforms.slack.app_token (SLACK_APP_TOKEN) is not set; Slack needs both tokens.",
    });
    expect(slack.calls).toHaveLength(0);
  });
});
