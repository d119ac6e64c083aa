import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeDiscord, startFakeDiscord } from "../../../test/fakes/discord-server.js";
import { createMemoryLogger } from "../../../test/helpers/memory-logger.js";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { waitFor } from "../../../test/helpers/wait-for.js";
import type { AcceptResult, InboundMessage, InboundSink } from "../../contract/platform.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { DiscordAdapter } from "./adapter.js";
import type { DiscordTiming } from "./options.js";

const TOKEN = "discord-test-token";
const OWNER = { id: "100000000000000042", username: "owner" };
const STRANGER = { id: "100000000000000099", username: "stranger" };

const FAST: Partial<DiscordTiming> = {
  deafAfterMs: 60_000,
  watchdogCheckMs: 50,
  backoffBaseMs: 20,
  backoffMaxMs: 200,
  typingIntervalMs: 50,
  stopTimeoutMs: 1_000,
  startWaitMs: 5_000,
  identifySpacingMs: 10,
  identifyMaxSpacingMs: 50,
};

/** Commits to the real store like the runner does; can be told to fail the next commits. */
class StoreSink implements InboundSink {
  failures = 0;
  calls = 0;
  /** While set, commits wait for it. */
  hold: Promise<void> | null = null;
  readonly accepted: InboundMessage[] = [];
  constructor(private readonly store: SqliteStore) {}
  async receive(message: InboundMessage): Promise<AcceptResult> {
    this.calls += 1;
    if (this.hold) await this.hold;
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error("disk full");
    }
    const result = await this.store.acceptInbound(message);
    if (result.accepted) this.accepted.push(message);
    return {
      accepted: result.accepted,
      inboxId: result.item.id,
      sessionId: result.item.sessionId,
    };
  }
}

describe("Discord adapter against a stand-in Discord", () => {
  let fake: FakeDiscord;
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let sink: StoreSink;
  const adapters: DiscordAdapter[] = [];
  let logs: ReturnType<typeof createMemoryLogger>;

  beforeEach(async () => {
    fake = await startFakeDiscord({ token: TOKEN });
    dir = createTempDir("keel-discord-");
    store = new SqliteStore(join(dir.path, "state.db"));
    sink = new StoreSink(store);
    logs = createMemoryLogger();
  });

  afterEach(async () => {
    for (const adapter of adapters.splice(0)) await adapter.stop();
    await store.close();
    await fake.close();
    dir.cleanup();
  });

  function adapter(options: { timing?: Partial<DiscordTiming>; free?: string[] } = {}) {
    const created = new DiscordAdapter({
      token: TOKEN,
      apiRoot: fake.apiRoot,
      allowedUsers: [OWNER.id],
      adminUsers: [],
      freeChannels: options.free ?? [],
      store,
      logger: logs.logger,
      timing: { ...FAST, ...options.timing },
    });
    adapters.push(created);
    return created;
  }

  async function started(options: Parameters<typeof adapter>[0] = {}) {
    const a = adapter(options);
    await a.start(sink);
    await waitFor(() => a.status().state === "connected", { message: "connected" });
    return a;
  }

  const texts = () => sink.accepted.map((m) => m.text);

  it("takes a DM into the DM session and replies to it once, split at 2000 characters", async () => {
    const a = await started();
    const dm = fake.dmChannel(OWNER.id);
    const sent = fake.userSends({ channelId: dm, user: OWNER, content: "hello" });
    await waitFor(() => sink.accepted.length === 1, { message: "stored" });
    const inbound = sink.accepted[0]!;
    expect(inbound.sessionKey).toBe(`agent:main:discord:dm:${OWNER.id}`);
    expect(inbound.chatId).toBe(dm);
    expect(inbound.platformMessageId).toBe(sent.id);

    const long = `${"a".repeat(1500)}\n${"b".repeat(1500)}`;
    const reply = {
      outboxId: 7,
      sessionKey: inbound.sessionKey,
      sessionId: "s",
      kind: "reply" as const,
    };
    await a.deliver({ ...reply, address: inbound.address, text: long });
    // The outbox retries the same row after a crash: the nonces make it a no-op.
    await a.deliver({ ...reply, address: inbound.address, text: long });
    const bot = fake.botMessages(dm);
    expect(bot.map((m) => m.content)).toEqual(["a".repeat(1500), "b".repeat(1500)]);
    expect(bot[0]!.message_reference?.message_id).toBe(sent.id);
    expect(bot[1]!.message_reference).toBeUndefined();
  });

  it("shows typing in the chat of a running turn", async () => {
    const a = await started({ timing: { typingDelayMs: 0 } });
    const dm = fake.dmChannel(OWNER.id);
    const stop = a.showTyping({ platform: "discord", chatId: dm });
    await waitFor(() => fake.requests.includes(`POST /channels/${dm}/typing`), {
      message: "typing in the DM",
    });
    stop();
  });

  it("does not double-post when Discord created a message but the response was lost", async () => {
    const a = await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.failSends(1, "500-after-create");
    await a.deliver({
      outboxId: 3,
      sessionKey: "k",
      sessionId: "s",
      kind: "reply",
      address: { platform: "discord", chatId: dm },
      text: "once",
    });
    expect(fake.botMessages(dm).map((m) => m.content)).toEqual(["once"]);
  });

  it("waits out a 429 on send and posts once", async () => {
    const a = await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.failSends(1, "429", 0.2);
    await a.deliver({
      outboxId: 4,
      sessionKey: "k",
      sessionId: "s",
      kind: "reply",
      address: { platform: "discord", chatId: dm },
      text: "after the limit",
    });
    expect(fake.botMessages(dm).map((m) => m.content)).toEqual(["after the limit"]);
    expect(fake.requests.filter((r) => r === `POST /channels/${dm}/messages`)).toHaveLength(2);
  });

  it("answers in a guild channel only when mentioned, and starts a thread session on the message", async () => {
    const a = await started();
    const channel = fake.createGuildChannel();
    fake.userSends({ channelId: channel, user: OWNER, content: "chatter" });
    const asked = fake.userSends({
      channelId: channel,
      user: OWNER,
      content: "help me",
      mentionBot: true,
    });
    await waitFor(() => sink.accepted.length === 1, { message: "mention stored" });
    const inbound = sink.accepted[0]!;
    expect(inbound.text).toBe("help me");
    expect(inbound.sessionKey).toBe(`agent:main:discord:thread:${asked.id}`);

    await a.deliver({
      outboxId: 1,
      sessionKey: inbound.sessionKey,
      sessionId: "s",
      kind: "reply",
      address: inbound.address,
      text: "**Sure** — here goes",
    });
    // The thread took the message's id; the reply is in it.
    expect(fake.channel(asked.id)).toEqual({ type: 11, parent_id: channel });
    expect(fake.botMessages(asked.id).map((m) => m.content)).toEqual(["**Sure** — here goes"]);

    // In Keel's thread a follow-up needs no mention, and lands in the same session.
    await store.ensureSession(inbound.sessionKey, inbound.address);
    fake.userSends({ channelId: asked.id, user: OWNER, content: "and then?" });
    await waitFor(() => sink.accepted.length === 2, { message: "thread follow-up stored" });
    expect(sink.accepted[1]!.sessionKey).toBe(inbound.sessionKey);
    expect(texts()).toEqual(["help me", "and then?"]);
  });

  it("answers every message of a free channel", async () => {
    const channel = fake.createGuildChannel();
    await started({ free: [channel] });
    fake.userSends({ channelId: channel, user: OWNER, content: "no mention needed" });
    await waitFor(() => sink.accepted.length === 1, { message: "free channel message stored" });
  });

  it("gives a stranger in a DM a pairing code and stores nothing; ignores strangers in guilds", async () => {
    await started();
    const channel = fake.createGuildChannel();
    fake.userSends({ channelId: channel, user: STRANGER, content: "hi bot", mentionBot: true });
    const dm = fake.dmChannel(STRANGER.id);
    fake.userSends({ channelId: dm, user: STRANGER, content: "let me in" });
    await waitFor(() => fake.botMessages(dm).length === 1, { message: "pairing answer" });
    expect(fake.botMessages(dm)[0]!.content).toMatch(/pairing code is [A-Z0-9]+/);
    expect(fake.botMessages(channel)).toEqual([]);
    expect(sink.accepted).toEqual([]);
    expect((await store.listPairingRequests("discord")).map((r) => r.userId)).toEqual([
      STRANGER.id,
    ]);
  });

  it("persists the session and resumes it after a restart, getting what was sent meanwhile", async () => {
    const first = await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.userSends({ channelId: dm, user: OWNER, content: "one" });
    await waitFor(() => sink.accepted.length === 1, { message: "first stored" });
    const sessionId = fake.sessionIds()[0]!;
    await first.stop();

    fake.userSends({ channelId: dm, user: OWNER, content: "two" });
    fake.userSends({ channelId: dm, user: OWNER, content: "three" });
    await started();
    await waitFor(() => sink.accepted.length === 3, { message: "replayed" });
    expect(texts()).toEqual(["one", "two", "three"]);
    // Replayed messages queue behind a running turn instead of interrupting it.
    expect(sink.accepted.map((m) => m.backlog === true)).toEqual([false, true, true]);
    expect(fake.identifies()).toHaveLength(1);
    expect(fake.resumes().at(-1)?.session_id).toBe(sessionId);
  });

  it("reconnects and resumes after a dropped socket (1006)", async () => {
    await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.dropConnections();
    fake.userSends({ channelId: dm, user: OWNER, content: "while dropped" });
    await waitFor(() => sink.accepted.length === 1, {
      message: "replayed after 1006",
      timeoutMs: 10_000,
    });
    expect(fake.resumes()).toHaveLength(1);
    expect(fake.identifies()).toHaveLength(1);
  });

  it("reconnects and resumes when Discord asks for it (op 7)", async () => {
    await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.requestReconnect();
    await waitFor(() => fake.resumes().length === 1, { message: "resumed", timeoutMs: 10_000 });
    fake.userSends({ channelId: dm, user: OWNER, content: "after reconnect" });
    await waitFor(() => sink.accepted.length === 1, { message: "stored" });
    expect(fake.identifies()).toHaveLength(1);
  });

  it("rebuilds a connection that went silent (no heartbeat ACK, no events)", async () => {
    // Heartbeats far apart: the library alone would not notice for a minute; the watchdog does.
    await fake.close();
    fake = await startFakeDiscord({ token: TOKEN, heartbeatIntervalMs: 600_000 });
    await started({ timing: { deafAfterMs: 300 } });
    const dm = fake.dmChannel(OWNER.id);
    fake.stall();
    fake.userSends({ channelId: dm, user: OWNER, content: "into the void" });
    await waitFor(() => sink.accepted.length === 1, {
      message: "resumed by the watchdog",
      timeoutMs: 10_000,
    });
    expect(fake.resumes().length).toBeGreaterThanOrEqual(1);
    expect(fake.connections()).toBeGreaterThanOrEqual(2);
  });

  it("a heartbeat Discord never ACKs closes the zombied connection and resumes: the message is taken once", async () => {
    // Heartbeats every 200 ms, the watchdog far away: the heartbeat without ACK alone must heal it.
    await fake.close();
    fake = await startFakeDiscord({ token: TOKEN, heartbeatIntervalMs: 200 });
    await started({ timing: { deafAfterMs: 600_000 } });
    const dm = fake.dmChannel(OWNER.id);
    fake.stall();
    fake.userSends({ channelId: dm, user: OWNER, content: "during the stall" });
    await waitFor(() => sink.accepted.length === 1, {
      message: "replayed after the resume",
      timeoutMs: 10_000,
    });
    fake.userSends({ channelId: dm, user: OWNER, content: "after" });
    await waitFor(() => sink.accepted.length === 2, { message: "the next message" });
    expect(texts()).toEqual(["during the stall", "after"]);
    expect(fake.resumes().length).toBeGreaterThanOrEqual(1);
    expect(fake.identifies()).toHaveLength(1);
  });

  it("catches up over REST when the session was invalidated", async () => {
    const first = await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.userSends({ channelId: dm, user: OWNER, content: "before" });
    await waitFor(() => sink.accepted.length === 1, { message: "first stored" });
    await first.stop();
    fake.invalidateSessions();
    fake.userSends({ channelId: dm, user: OWNER, content: "missed 1" });
    fake.userSends({ channelId: dm, user: OWNER, content: "missed 2" });
    await started();
    await waitFor(() => sink.accepted.length === 3, { message: "caught up", timeoutMs: 10_000 });
    expect(texts()).toEqual(["before", "missed 1", "missed 2"]);
    expect(sink.accepted.map((m) => m.backlog === true)).toEqual([false, true, true]);
    expect(fake.identifies()).toHaveLength(2);
    expect(fake.requests).toContain(`GET /channels/${dm}/messages`);
  });

  it("finishes a catch-up that a failed commit interrupted, on the next connection", async () => {
    const first = await started();
    const dm = fake.dmChannel(OWNER.id);
    fake.userSends({ channelId: dm, user: OWNER, content: "before" });
    await waitFor(() => sink.accepted.length === 1, { message: "first stored" });
    await first.stop();
    fake.invalidateSessions();
    fake.userSends({ channelId: dm, user: OWNER, content: "missed 1" });
    fake.userSends({ channelId: dm, user: OWNER, content: "missed 2" });
    sink.failures = 1;
    await started();
    await waitFor(() => sink.accepted.length === 3, { message: "caught up", timeoutMs: 10_000 });
    expect(texts()).toEqual(["before", "missed 1", "missed 2"]);
  });

  it("does not count an event whose message could not be stored: it is replayed", async () => {
    await started();
    const dm = fake.dmChannel(OWNER.id);
    sink.failures = 1;
    fake.userSends({ channelId: dm, user: OWNER, content: "retry me" });
    await waitFor(() => sink.accepted.length === 1, {
      message: "stored on replay",
      timeoutMs: 10_000,
    });
    expect(texts()).toEqual(["retry me"]);
    expect(fake.resumes().length).toBeGreaterThanOrEqual(1);
  });

  it("registers the slash commands and stores an invocation before acknowledging it", async () => {
    const a = adapter();
    await a.start(sink);
    await waitFor(() => fake.registeredCommands().length > 0, { message: "commands registered" });
    expect(fake.registeredCommands()).toContain("restart");
    const dm = fake.dmChannel(OWNER.id);
    let release: () => void = () => {};
    sink.hold = new Promise((resolve) => {
      release = resolve;
    });
    const { id } = fake.userInvokes({ channelId: dm, user: OWNER, name: "status" });
    await waitFor(() => sink.calls === 1, { message: "commit started" });
    // Nothing is acknowledged while the commit is pending.
    expect(fake.interactionCallbacks()).toEqual([]);
    release();
    await waitFor(() => fake.interactionCallbacks().length === 1, { message: "acknowledged" });
    expect(fake.interactionCallbacks()[0]!.interactionId).toBe(id);
    const stored = sink.accepted[0]!;
    expect(stored.text).toBe("/status");
    expect(stored.platformMessageId).toBe(id);
    expect(stored.sessionKey).toBe(`agent:main:discord:dm:${OWNER.id}`);

    // In a plain guild channel there is no conversation: answered, nothing stored.
    const channel = fake.createGuildChannel();
    fake.userInvokes({ channelId: channel, user: OWNER, name: "new" });
    await waitFor(() => fake.interactionCallbacks().length === 2, { message: "second ack" });
    expect(sink.accepted).toHaveLength(1);
  });

  it("a refused Message Content intent (close 4014) is an error naming the fix", async () => {
    const a = await started({ timing: { deafAfterMs: 100 } });
    fake.closeConnections(4014);
    await waitFor(() => a.status().state === "error", { message: "error state" });
    expect(a.status().error).toMatch(/Message Content intent.*Developer Portal/);
  });

  it("reports a rejected token as an error and stops trying", async () => {
    const a = new DiscordAdapter({
      token: "wrong",
      apiRoot: fake.apiRoot,
      allowedUsers: [],
      adminUsers: [],
      freeChannels: [],
      store,
      logger: logs.logger,
      timing: FAST,
    });
    adapters.push(a);
    await a.start(sink);
    await waitFor(() => a.status().state === "error", { message: "error state" });
    expect(a.status().error).toMatch(/DISCORD_BOT_TOKEN/);
    expect(fake.identifies()).toHaveLength(0);
  });
});
