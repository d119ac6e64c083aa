/**
 * Discord through the gateway (@discordjs/ws) and REST (@discordjs/rest), with Keel's rules:
 *
 * - A message is committed to the inbox before its sequence counts as handled; the session id,
 *   resume URL and last handled sequence are in the store (gateway-session.ts), so a restart
 *   RESUMEs and Discord replays what was sent meanwhile; the inbox drops what it already has.
 * - Dispatches are handled one at a time, in order. When one cannot be stored, the rest of that
 *   connection's events are dropped and the connection is rebuilt to resume from the last handled
 *   one, which makes Discord send them again.
 * - When the session cannot be resumed (invalidated, or gone after a long outage), the next READY
 *   is followed by a catch-up over REST: `GET /channels/:id/messages?after=` from the last
 *   stored message of each recently active channel (and the free channels).
 * - A watchdog rebuilds the connection when nothing (no heartbeat ACK, no event) has arrived for
 *   a while, whatever state the library believes it is in: never "online but deaf".
 * - Identifies are spaced out and counted in the store (gateway-session.ts).
 */
import { DiscordAPIError, REST } from "@discordjs/rest";
import { WebSocketManager, WebSocketShardEvents } from "@discordjs/ws";
import {
  type APIChannel,
  type APIInteraction,
  type APIMessage,
  type APIUser,
  GatewayDispatchEvents,
  type GatewayDispatchPayload,
  GatewayIntentBits,
  InteractionResponseType,
  MessageFlags,
  Routes,
} from "discord-api-types/v10";
import type { Logger } from "pino";
import type {
  ChatAddress,
  ConnectionLease,
  ConnectionReport,
  InboundMessage,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
  ProgressUpdate,
} from "../../contract/platform.js";
import type { PairingStore, PlatformDataStore, SessionStore } from "../../sessions/store.js";
import { ChatAccess } from "../chat-access.js";
import { type ConnectingAdapterOptions, ConnectionState } from "../kit/connection-state.js";
import type { ProgressView } from "../progress-view.js";
import { typingSchedule } from "../typing.js";
import { DISCORD_COMMANDS, type SlashCommand, slashCommandOf } from "./commands.js";
import { DiscordGatewaySession, IdentifyBudget } from "./gateway-session.js";
import {
  type ChannelFacts,
  discordDmSessionKey,
  discordThreadSessionKey,
  type IntakeContext,
  isDirectMessage,
  isUserMessage,
  mayConcernBot,
  THREAD_CHANNEL_TYPES,
  toInboundMessage,
} from "./inbound.js";
import { createDiscordProgress, type DiscordProgressSettings } from "./progress.js";
import { DiscordSender, describeDiscordError } from "./send.js";

/** What the adapter needs of the store: pairing, its gateway state, sessions and catch-up cursors. */
export type DiscordStore = PairingStore & PlatformDataStore & SessionStore;

/** Guild and DM messages with their text; Message Content is privileged (docs/operations.md). */
export const DISCORD_INTENTS =
  GatewayIntentBits.Guilds |
  GatewayIntentBits.GuildMessages |
  GatewayIntentBits.DirectMessages |
  GatewayIntentBits.MessageContent;

export interface DiscordTiming {
  /** Rebuild the connection when no heartbeat ACK and no event arrived for this long. */
  deafAfterMs: number;
  watchdogCheckMs: number;
  /** Backoff after a failed connect or a message that could not be stored. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  typingIntervalMs: number;
  /** Typing shows only for turns still running after this long. */
  typingDelayMs: number;
  /** Bound on stop(), and on how long start() waits for the first connection. */
  stopTimeoutMs: number;
  startWaitMs: number;
  /** Identify spacing (doubles within a burst) and the daily cap, below Discord's 1000. */
  identifySpacingMs: number;
  identifyMaxSpacingMs: number;
  maxIdentifiesPerDay: number;
  /** Channels with a stored message this recent are caught up after a lost session. */
  catchUpWindowMs: number;
  /** Pages of 100 messages read per channel in a catch-up. */
  catchUpMaxPages: number;
  /** REST request timeout. */
  restTimeoutMs: number;
}

export const DEFAULT_DISCORD_TIMING: DiscordTiming = {
  deafAfterMs: 120_000,
  watchdogCheckMs: 10_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  typingIntervalMs: 8_000,
  typingDelayMs: 1_000,
  stopTimeoutMs: 3_000,
  startWaitMs: 10_000,
  identifySpacingMs: 5_000,
  identifyMaxSpacingMs: 600_000,
  maxIdentifiesPerDay: 900,
  catchUpWindowMs: 7 * 86_400_000,
  catchUpMaxPages: 10,
  restTimeoutMs: 15_000,
};

export interface DiscordAdapterOptions extends ConnectingAdapterOptions<DiscordProgressSettings> {
  token: string;
  /** REST base, e.g. https://discord.com/api (the gateway URL comes from /v10/gateway/bot). */
  apiRoot: string;
  allowedUsers: readonly string[];
  adminUsers: readonly string[];
  freeChannels: readonly string[];
  store: DiscordStore;
  timing?: Partial<DiscordTiming>;
  /**
   * Several gateways on one store: this one keeps the gateway connection only while it holds
   * the bot's connection lease (it sends through REST either way). Without it, it connects at once.
   */
  connection?: ConnectionLease;
}

/** Close codes after which reconnecting cannot help (https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes). */
const FATAL_CLOSES: Record<number, string> = {
  4004: "Discord rejected the bot token (close 4004). Check platforms.discord.token (DISCORD_BOT_TOKEN) and restart Keel.",
  4013: "Discord rejected the gateway intents (close 4013).",
  4014: "Discord refused the Message Content intent (close 4014): enable it for the bot in the Developer Portal (Bot → Privileged Gateway Intents) and restart Keel.",
};
const UNAUTHORIZED_TEXT =
  "Discord rejected the bot token (401 Unauthorized). Check platforms.discord.token (DISCORD_BOT_TOKEN) and restart Keel.";

/** Resolves once either signal aborts. */
function untilAborted(a: AbortSignal, b: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (a.aborted || b.aborted) return resolve();
    a.addEventListener("abort", () => resolve(), { once: true });
    b.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** Snowflake order: longer is larger, then by digits. */
function compareSnowflakes(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

/** The smallest snowflake of a moment (Discord epoch 2015-01-01), for "messages after then". */
export function snowflakeAt(ms: number): string {
  return ((BigInt(Math.max(ms, 1_420_070_400_000)) - 1_420_070_400_000n) << 22n).toString();
}

/** When a snowflake was made (ms since 1970). */
export function snowflakeTime(id: string): number {
  return Number(BigInt(id) >> 22n) + 1_420_070_400_000;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

type GuildMessage = APIMessage & { guild_id?: string };

/** The Discord platform adapter. Single use: after stop() it does not start again. */
export class DiscordAdapter implements PlatformAdapter {
  readonly name = "discord";
  private readonly logger: Logger;
  private readonly timing: DiscordTiming;
  private readonly rest: REST;
  /** For previews: a rate-limited call is rejected (the preview waits), not waited out. */
  private readonly previewRest: REST;
  private readonly sender: DiscordSender;
  private readonly progressView: ProgressView | null;
  private readonly access: ChatAccess;
  private readonly session: DiscordGatewaySession;
  private readonly budget: IdentifyBudget;
  private readonly freeChannels: ReadonlySet<string>;
  private readonly health: ConnectionState;
  private sink: InboundSink | null = null;
  private manager: WebSocketManager | null = null;
  /** Bumped on every rebuild of the connection: events of an older connection are dropped. */
  private generation = 0;
  private intake: Promise<void> = Promise.resolve();
  private botUserId: string | null = null;
  private lastLife = Date.now();
  private watchdog: NodeJS.Timeout | null = null;
  private rebuilding = false;
  private failures = 0;
  /** The sequence of an event that could not be stored, until one after it is. */
  private failedSeq: number | null = null;
  /** A catch-up that could not finish: from when it reads (the lost session's last event). */
  private catchUpFrom: number | null = null;
  private fatal: string | null = null;
  private identifyWaiting = false;
  /** With a connection lease: true while this gateway holds it (and may connect). */
  private holding = false;
  /**
   * When the current connection opened. A message created before it was missed and is
   * delivered late (Discord's replay): the library may emit RESUMED before the replayed events,
   * so the message's own time tells, not the order.
   */
  private connectedAt = 0;
  /** Channel facts learned from GUILD_CREATE, THREAD_CREATE and lookups. */
  private readonly channels = new Map<
    string,
    { type: number; parentId?: string; guildId?: string }
  >();
  private firstConnection: (() => void) | null = null;
  private commandsRegistered = false;
  /** Connections closed by Keel (rebuilt or stopping): their session reports are ignored. */
  private readonly retired = new WeakSet<WebSocketManager>();

  constructor(private readonly options: DiscordAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_DISCORD_TIMING, ...options.timing };
    this.health = new ConnectionState({
      platform: "discord",
      logger: this.logger,
      ...(options.onStatusChange && { onStatusChange: options.onStatusChange }),
      backoff: { baseMs: this.timing.backoffBaseMs, maxMs: this.timing.backoffMaxMs },
      // Heartbeats keep a held connection talking; a standby (another gateway holds it) is quiet.
      ...(!options.connection && { stalledAfterMs: this.timing.deafAfterMs }),
    });
    this.rest = new REST({
      api: options.apiRoot,
      version: "10",
      timeout: this.timing.restTimeoutMs,
    }).setToken(options.token);
    this.sender = new DiscordSender(this.rest, this.logger);
    this.previewRest = new REST({
      api: options.apiRoot,
      version: "10",
      timeout: this.timing.restTimeoutMs,
      rejectOnRateLimit: () => true,
      retries: 0,
    }).setToken(options.token);
    this.progressView = options.progress
      ? createDiscordProgress(
          this.sender,
          this.previewRest,
          options.progress.store,
          options.progress.settings,
          this.logger,
          this.health.stopSignal,
        )
      : null;
    this.access = new ChatAccess("discord", [...options.allowedUsers], options.store, [
      ...options.adminUsers,
    ]);
    this.freeChannels = new Set(options.freeChannels);
    this.session = new DiscordGatewaySession(options.store, this.logger);
    this.budget = new IdentifyBudget(
      options.store,
      {
        maxPerDay: this.timing.maxIdentifiesPerDay,
        spacingMs: this.timing.identifySpacingMs,
        maxSpacingMs: this.timing.identifyMaxSpacingMs,
        onWait: (waiting) => {
          this.identifyWaiting = waiting;
          if (!waiting) this.lastLife = Date.now();
        },
        onExhausted: (message) => {
          if (message) this.health.fail(message);
        },
      },
      this.logger,
    );
  }

  status(): PlatformStatus {
    return this.health.status();
  }

  connection(): ConnectionReport {
    return this.health.report();
  }

  /** Connects in the background; resolves after the first connection (or `startWaitMs`). */
  async start(sink: InboundSink): Promise<void> {
    if (this.sink || this.health.stopped) return;
    this.sink = sink;
    this.health.set("starting");
    await this.session.load();
    const connected = new Promise<void>((resolve) => {
      this.firstConnection = resolve;
    });
    if (this.options.connection) {
      void this.holdConnection(this.options.connection);
    } else {
      void this.connect(this.generation);
    }
    this.watchdog = setInterval(() => this.checkAlive(), this.timing.watchdogCheckMs);
    await Promise.race([connected, sleep(this.timing.startWaitMs, this.health.stopSignal)]);
  }

  /**
   * Several gateways: connects while this one holds the connection lease, lets the connection
   * go when the lease moves on, and waits to hold it again. The session the previous holder
   * stored is read at each takeover, so the connection RESUMEs where it left off (Discord
   * replays what came meanwhile; the inbox stores each message once).
   */
  private async holdConnection(lease: ConnectionLease): Promise<void> {
    while (!this.health.stopped) {
      // A standby has started: it sends, only the holder receives.
      const held = await lease.acquire(this.health.stopSignal, () => this.standBy());
      if (!held) return;
      await this.session.load();
      this.holding = true;
      this.lastLife = Date.now();
      this.generation += 1;
      void this.connect(this.generation);
      await untilAborted(held, this.health.stopSignal);
      this.holding = false;
      if (this.health.stopped) return;
      this.logger.warn("discord connection handed over to another gateway; standing by");
      this.generation += 1;
      const manager = this.manager;
      this.manager = null;
      if (manager) await this.closeManager(manager, "handed over");
      await this.session.flush();
    }
  }

  /** Waiting for the connection lease: reported connected (replies still go out), no watchdog. */
  private standBy(): void {
    if (this.holding || this.health.stopped) return;
    this.health.set("connected");
    this.firstConnection?.();
  }

  /**
   * Stops intake and closes the gateway with a code that keeps the session resumable (anything
   * but 1000/1001), so the next start RESUMEs; bounded by `stopTimeoutMs` per step.
   */
  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    this.generation += 1;
    if (this.watchdog) clearInterval(this.watchdog);
    const manager = this.manager;
    this.manager = null;
    if (manager) await this.closeManager(manager, "Keel is stopping");
    await Promise.race([this.intake, sleep(this.timing.stopTimeoutMs)]);
    await Promise.race([this.session.flush(), sleep(this.timing.stopTimeoutMs)]);
    // After the session is stored: the next holder resumes from it.
    await this.options.connection?.release();
    await this.progressView?.stop();
    // The REST clients' cache sweepers are timers that would keep the process alive.
    for (const rest of [this.rest, this.previewRest]) {
      rest.clearHashSweeper();
      rest.clearHandlerSweeper();
    }
    this.health.set("stopped");
    this.logger.info("discord stopped");
  }

  deliver(reply: OutboundReply): Promise<void> {
    return this.progressView ? this.progressView.deliver(reply) : this.sender.deliver(reply);
  }

  /** Shows a running turn's reply and tool activity as it happens (progress.ts). */
  progress(update: ProgressUpdate): void {
    if (!this.health.stopped) this.progressView?.onProgress(update);
  }

  showTyping(address: ChatAddress): () => void {
    if (this.health.stopped) return () => {};
    const send = () => {
      this.sender.typing(address).catch((err: unknown) => {
        this.logger.debug({ error: describeDiscordError(err) }, "typing indicator failed");
      });
    };
    // Discord allows a bot 50 REST requests a second in all: a turn that answers quickly
    // shows no typing and leaves the budget to the replies.
    return typingSchedule(send, this.timing.typingDelayMs, this.timing.typingIntervalMs);
  }

  /** Builds a connection and connects it, retrying with backoff, until it is ready or replaced. */
  private async connect(generation: number): Promise<void> {
    for (let attempt = 1; !this.health.stopped && generation === this.generation; attempt++) {
      try {
        if (!this.botUserId) {
          const me = (await this.rest.get(Routes.user(), {
            signal: this.health.stopSignal,
          })) as APIUser;
          this.botUserId = me.id;
        }
        if (this.health.stopped || generation !== this.generation) return;
        const manager = this.createManager(generation);
        this.manager = manager;
        this.lastLife = Date.now();
        // Resolves at the first READY or RESUMED; a connection that never gets there is the
        // watchdog's to rebuild.
        await manager.connect();
        return;
      } catch (err) {
        if (this.health.stopped || generation !== this.generation) return;
        if (err instanceof DiscordAPIError && err.status === 401) {
          this.fail(UNAUTHORIZED_TEXT);
          return;
        }
        this.health.fail(`Cannot reach Discord (${describeDiscordError(err)}); retrying.`);
        this.firstConnection?.();
        await sleep(this.health.backoffMs(attempt), this.health.stopSignal);
      }
    }
  }

  private createManager(generation: number): WebSocketManager {
    const manager: WebSocketManager = new WebSocketManager({
      token: this.options.token,
      intents: DISCORD_INTENTS,
      rest: this.rest,
      shardCount: 1,
      helloTimeout: 30_000,
      readyTimeout: 30_000,
      retrieveSessionInfo: (shardId) => this.session.retrieve(shardId),
      // A connection Keel has let go of reports nothing more: its teardown's "forget the
      // session" must not drop the session the next connection resumes.
      updateSessionInfo: (_shardId, info) =>
        this.retired.has(manager) ? undefined : this.session.update(info),
      buildIdentifyThrottler: () => this.budget,
    });
    const current = () => generation === this.generation && !this.health.stopped;
    manager.on(WebSocketShardEvents.Dispatch, (payload) => {
      if (current()) this.enqueue(payload, generation);
    });
    manager.on(WebSocketShardEvents.HeartbeatComplete, () => {
      if (!current()) return;
      this.lastLife = Date.now();
      this.health.sawEvent();
    });
    manager.on(WebSocketShardEvents.Hello, () => {
      if (!current()) return;
      this.lastLife = Date.now();
      this.health.sawEvent();
      this.connectedAt = Date.now();
    });
    manager.on(WebSocketShardEvents.Closed, (code) => {
      if (!current()) return;
      this.logger.info({ code }, "discord gateway closed");
      const fatal = FATAL_CLOSES[code];
      if (fatal) this.fail(fatal);
    });
    manager.on(WebSocketShardEvents.Error, (err) => {
      this.logger.warn({ err }, "discord gateway error");
    });
    manager.on(WebSocketShardEvents.Debug, (message) => {
      this.logger.trace({ message }, "discord gateway");
    });
    return manager;
  }

  /** Stops for good: reconnecting cannot help until the operator changes something. */
  private fail(message: string): void {
    this.fatal = message;
    this.generation += 1;
    this.health.fail(message, { retrying: false });
    this.firstConnection?.();
    const manager = this.manager;
    this.manager = null;
    if (manager) void this.closeManager(manager, "fatal");
  }

  /** Closes a connection without forgetting the session (a non-1000 code keeps it resumable). */
  private async closeManager(manager: WebSocketManager, reason: string): Promise<void> {
    this.retired.add(manager);
    manager.removeAllListeners();
    manager.on(WebSocketShardEvents.Error, () => {});
    await Promise.race([
      (async () => manager.destroy({ code: 4000, reason }))().catch((err: unknown) => {
        this.logger.debug({ err }, "discord connection teardown failed");
      }),
      sleep(this.timing.stopTimeoutMs),
    ]);
  }

  /** The watchdog: no heartbeat ACK and no event for `deafAfterMs` means the connection is dead. */
  private checkAlive(): void {
    if (this.health.stopped || this.fatal || this.rebuilding || this.identifyWaiting) return;
    if (this.options.connection && !this.holding) return;
    const silentMs = Date.now() - this.lastLife;
    if (silentMs < this.timing.deafAfterMs) return;
    void this.rebuild(`nothing received from Discord for ${Math.round(silentMs / 1000)} s`);
  }

  /**
   * Throws the connection away and builds a new one, which resumes from the last handled event.
   * Events of the old connection still queued are dropped: Discord replays them.
   */
  private async rebuild(reason: string): Promise<void> {
    if (this.rebuilding || this.health.stopped || this.fatal) return;
    this.rebuilding = true;
    try {
      this.failures += 1;
      this.generation += 1;
      const generation = this.generation;
      this.logger.warn({ reason, attempt: this.failures }, "discord reconnecting");
      this.health.fail(`Reconnecting to Discord: ${reason}.`);
      const manager = this.manager;
      this.manager = null;
      if (manager) await this.closeManager(manager, reason);
      await sleep(this.health.backoffMs(this.failures), this.health.stopSignal);
      this.lastLife = Date.now();
      void this.connect(generation);
    } finally {
      this.rebuilding = false;
    }
  }

  /** Queues a dispatch behind the ones before it; its sequence counts once it is handled. */
  private enqueue(payload: GatewayDispatchPayload, generation: number): void {
    this.lastLife = Date.now();
    this.health.sawEvent();
    this.intake = this.intake.then(async () => {
      if (generation !== this.generation || this.health.stopped) return;
      try {
        await this.handle(payload);
        this.session.commit(payload.s);
        if (this.failedSeq !== null && payload.s !== null && payload.s > this.failedSeq) {
          this.failedSeq = null;
          this.failures = 0;
        }
      } catch (err) {
        if (generation !== this.generation || this.health.stopped) return;
        this.failedSeq = payload.s;
        this.logger.error(
          { err, event: payload.t, seq: payload.s },
          "discord event not stored; reconnecting to have it replayed",
        );
        void this.rebuild("an event could not be stored");
      }
    });
  }

  private async handle(payload: GatewayDispatchPayload): Promise<void> {
    switch (payload.t) {
      case GatewayDispatchEvents.Ready: {
        this.botUserId = payload.d.user.id;
        this.onConnected("ready");
        void this.registerCommands(payload.d.application.id);
        // A new session numbers its events from 1 again.
        this.failedSeq = null;
        await this.catchUpIfNeeded(this.session.takeLoss());
        return;
      }
      case GatewayDispatchEvents.Resumed:
        this.onConnected("resumed");
        // Resumed: nothing of this session was missed; an unfinished catch-up still runs.
        this.session.takeLoss();
        await this.catchUpIfNeeded(null);
        return;
      case GatewayDispatchEvents.GuildCreate: {
        const d = payload.d as { id: string; channels?: APIChannel[]; threads?: APIChannel[] };
        for (const channel of [...(d.channels ?? []), ...(d.threads ?? [])]) {
          this.noteChannel(channel, d.id);
        }
        return;
      }
      case GatewayDispatchEvents.ThreadCreate:
      case GatewayDispatchEvents.ThreadUpdate:
      case GatewayDispatchEvents.ChannelCreate:
      case GatewayDispatchEvents.ChannelUpdate:
        this.noteChannel(payload.d as APIChannel);
        return;
      case GatewayDispatchEvents.InteractionCreate: {
        const command = slashCommandOf(payload.d as APIInteraction);
        if (command) await this.takeCommand(command);
        return;
      }
      case GatewayDispatchEvents.MessageCreate:
        await this.take(payload.d as GuildMessage, snowflakeTime(payload.d.id) < this.connectedAt);
        return;
      default:
        return;
    }
  }

  private onConnected(how: "ready" | "resumed"): void {
    // An event that failed to store keeps the backoff growing until it is past.
    if (this.failedSeq === null) this.failures = 0;
    this.lastLife = Date.now();
    this.health.set("connected");
    this.logger.info({ how }, "discord connected");
    // Previews an earlier process left mid-stream (a crash) are marked interrupted.
    void this.progressView?.sweep();
    this.firstConnection?.();
    this.firstConnection = null;
  }

  private noteChannel(channel: APIChannel, guildId?: string): void {
    const c = channel as APIChannel & { parent_id?: string | null; guild_id?: string };
    const facts: { type: number; parentId?: string; guildId?: string } = { type: c.type };
    if (c.parent_id) facts.parentId = c.parent_id;
    const guild = c.guild_id ?? guildId;
    if (guild) facts.guildId = guild;
    this.channels.set(c.id, facts);
    if (THREAD_CHANNEL_TYPES.has(c.type)) this.sender.noteThread(c.id);
  }

  /** What kind of channel this is: from the gateway's events, or asked once over REST. */
  private async channelInfo(
    channelId: string,
  ): Promise<{ type: number; parentId?: string; guildId?: string }> {
    const known = this.channels.get(channelId);
    if (known) return known;
    try {
      const channel = (await this.rest.get(Routes.channel(channelId))) as APIChannel;
      this.noteChannel(channel);
      return this.channels.get(channelId)!;
    } catch (err) {
      // A refusal will not change on a replay: take it as a plain channel rather than stall
      // intake on it. Anything else (5xx, network) is retried through the replay.
      if (!(err instanceof DiscordAPIError) || err.status >= 500 || err.status === 429) throw err;
      this.logger.warn(
        { channel: channelId, error: describeDiscordError(err) },
        "discord channel unknown",
      );
      return { type: 0 };
    }
  }

  private context(): IntakeContext {
    return { botUserId: this.botUserId ?? "", freeChannels: this.freeChannels };
  }

  /** Stores a message for Keel (or answers a stranger); ignores the rest. Throws when not stored. */
  private async take(message: GuildMessage, backlog: boolean): Promise<void> {
    const inbound = await this.toInbound(message, backlog);
    if (inbound) await this.sink?.receive(inbound);
  }

  /** The message to store for Keel, or null (ignored, or a stranger answered here). */
  private async toInbound(message: GuildMessage, backlog: boolean): Promise<InboundMessage | null> {
    const sink = this.sink;
    if (!sink || !this.botUserId || !isUserMessage(message, this.botUserId)) return null;
    const context = this.context();
    let channel: ChannelFacts | null = null;
    if (!isDirectMessage(message)) {
      const ours =
        (await this.options.store.getSession(discordThreadSessionKey(message.channel_id))) !== null;
      const cached = this.channels.get(message.channel_id);
      const freeParent =
        cached?.parentId !== undefined &&
        THREAD_CHANNEL_TYPES.has(cached.type) &&
        this.freeChannels.has(cached.parentId);
      if (!mayConcernBot(message, context, ours || freeParent)) return null;
      const info = ours ? { type: 11 } : await this.channelInfo(message.channel_id);
      channel = { isThread: THREAD_CHANNEL_TYPES.has(info.type), hasSession: ours };
      if (info.parentId !== undefined) channel.parentId = info.parentId;
    }
    const inbound = toInboundMessage(message, context, channel);
    if (!inbound || inbound.senderId === undefined) return null;
    if (this.access.isOperator(inbound.senderId)) inbound.operator = true;
    if (backlog) inbound.backlog = true;
    if (await this.access.isAllowed(inbound.senderId)) return inbound;
    // Strangers in guild channels are ignored; in a DM they get a pairing code.
    if (!isDirectMessage(message)) return null;
    const text = await this.access.pairingAnswer({
      userId: inbound.senderId,
      userName: inbound.senderName ?? null,
      chatId: inbound.chatId,
    });
    this.logger.info({ userId: inbound.senderId }, "discord pairing requested");
    try {
      await this.sender.sendPlain(inbound.chatId, text);
    } catch (err) {
      // A refusal (DMs closed) will not get better on a replay; anything else may.
      if (err instanceof DiscordAPIError && err.status < 500 && err.status !== 429) {
        this.logger.warn({ error: describeDiscordError(err) }, "pairing answer not delivered");
        return null;
      }
      throw err;
    }
    return null;
  }

  private async receiveTogether(messages: InboundMessage[]): Promise<void> {
    const sink = this.sink;
    if (!sink || messages.length === 0) return;
    if (sink.receiveAll) {
      await sink.receiveAll(messages);
      return;
    }
    for (const message of messages) await sink.receive(message);
  }

  /** Registers the slash commands once per process; a failure leaves the typed commands. */
  private async registerCommands(applicationId: string): Promise<void> {
    if (this.commandsRegistered) return;
    this.commandsRegistered = true;
    try {
      await this.rest.put(Routes.applicationCommands(applicationId), { body: DISCORD_COMMANDS });
    } catch (err) {
      this.commandsRegistered = false;
      this.logger.warn(
        { error: describeDiscordError(err) },
        "discord slash commands not registered",
      );
    }
  }

  /**
   * A slash command: stored like the typed command (in a DM, or in a thread, whose session it
   * acts on), then acknowledged to Discord with a note only the user sees; the command's answer
   * comes as a message in the channel. In a plain channel there is no conversation to act on.
   */
  private async takeCommand(command: SlashCommand): Promise<void> {
    const sink = this.sink;
    if (!sink) return;
    const allowed = await this.access.isAllowed(command.userId);
    let sessionKey: string | null = null;
    if (command.guildId === undefined) sessionKey = discordDmSessionKey(command.userId);
    else {
      const ours =
        (await this.options.store.getSession(discordThreadSessionKey(command.channelId))) !== null;
      const info = ours ? { type: 11 } : await this.channelInfo(command.channelId);
      if (THREAD_CHANNEL_TYPES.has(info.type))
        sessionKey = discordThreadSessionKey(command.channelId);
    }
    if (allowed && sessionKey) {
      await sink.receive({
        platform: "discord",
        chatId: command.channelId,
        platformMessageId: command.interactionId,
        sessionKey,
        text: command.text,
        senderId: command.userId,
        ...(command.userName !== undefined && { senderName: command.userName }),
        address: { platform: "discord", chatId: command.channelId },
        ...(this.access.isOperator(command.userId) && { operator: true }),
      });
    }
    const note = !allowed
      ? "I don't know you yet: send me a direct message to get a pairing code."
      : sessionKey
        ? `${command.text} received.`
        : "Use my commands in a direct message or in one of my threads.";
    try {
      await this.rest.post(Routes.interactionCallback(command.interactionId, command.token), {
        body: {
          type: InteractionResponseType.ChannelMessageWithSource,
          data: { content: note, flags: MessageFlags.Ephemeral },
        },
        auth: false,
      });
    } catch (err) {
      // An interaction replayed after a restart has expired; its command is stored all the same.
      this.logger.debug(
        { error: describeDiscordError(err) },
        "discord interaction not acknowledged",
      );
    }
  }

  /** Runs the catch-up a lost session (or an unfinished earlier catch-up) calls for. */
  private async catchUpIfNeeded(lostAt: number | null): Promise<void> {
    const from = lostAt ?? this.catchUpFrom;
    this.catchUpFrom = null;
    if (from !== null) await this.catchUp(from);
  }

  /**
   * After a session was lost: reads what each recently active channel (and each free channel)
   * received since its last stored message and takes it like a live message. Overlap with
   * what was stored is harmless (the inbox is unique per message).
   */
  private async catchUp(lostAt: number): Promise<void> {
    const since = Date.now() - this.timing.catchUpWindowMs;
    const from = new Map<string, string>();
    for (const chat of await this.options.store.listRecentChats("discord", since)) {
      from.set(chat.chatId, chat.lastMessageId);
    }
    for (const channel of this.freeChannels) {
      if (!from.has(channel)) from.set(channel, snowflakeAt(lostAt));
    }
    this.logger.info({ channels: from.size }, "discord session was lost: catching up over REST");
    let taken = 0;
    let incomplete = false;
    for (const [channelId, after] of from) {
      try {
        taken += await this.catchUpChannel(channelId, after);
      } catch (err) {
        // Discord refusing a channel (access gone) will not change; anything else (a 5xx, the
        // network, a message that could not be stored) is tried again.
        const refused = err instanceof DiscordAPIError && err.status < 500 && err.status !== 429;
        if (!refused) incomplete = true;
        this.logger.warn(
          { channel: channelId, error: describeDiscordError(err), retry: !refused },
          "discord catch-up of a channel failed",
        );
      }
    }
    this.logger.info({ messages: taken }, "discord catch-up done");
    if (incomplete) {
      // Finished on the next connection, which the failure below makes the adapter build.
      this.catchUpFrom = lostAt;
      throw new Error("the catch-up over REST is incomplete");
    }
  }

  private async catchUpChannel(channelId: string, after: string): Promise<number> {
    const info = await this.channelInfo(channelId);
    let cursor = after;
    let taken = 0;
    for (let page = 0; page < this.timing.catchUpMaxPages; page++) {
      const batch = (await this.rest.get(Routes.channelMessages(channelId), {
        query: new URLSearchParams({ after: cursor, limit: "100" }),
      })) as GuildMessage[];
      batch.sort((a, b) => compareSnowflakes(a.id, b.id));
      const inbound: InboundMessage[] = [];
      for (const message of batch) {
        // REST messages carry no guild id; the channel says whether it is a DM.
        if (info.guildId !== undefined) message.guild_id = info.guildId;
        else delete message.guild_id;
        const taken = await this.toInbound(message, true);
        if (taken) inbound.push(taken);
      }
      // Handed over together: a chat's missed messages are one turn (InboundSink.receiveAll).
      await this.receiveTogether(inbound);
      taken += batch.length;
      if (batch.length < 100) break;
      cursor = batch.at(-1)!.id;
    }
    return taken;
  }
}
