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
import { setTimeout as delay } from "node:timers/promises";
import { DiscordAPIError, REST } from "@discordjs/rest";
import { WebSocketManager, WebSocketShardEvents } from "@discordjs/ws";
import {
  type APIChannel,
  type APIInteraction,
  type APIMessage,
  type APIUser,
  GatewayDispatchEvents,
  type GatewayDispatchPayload,
  Routes,
} from "discord-api-types/v10";
import type { Logger } from "pino";
import type {
  ChatAddress,
  ConnectionLease,
  InboundMessage,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
} from "../../contract/platform.js";
import { ChatAccess } from "../chat-access.js";
import { ConnectionState } from "../kit/connection-state.js";
import type { ProgressView } from "../progress-view.js";
import { typingSchedule } from "../typing.js";
import { DiscordCatchUp } from "./catch-up.js";
import { DiscordChannels } from "./channels.js";
import { slashCommandOf } from "./commands.js";
import { DiscordGatewaySession, IdentifyBudget } from "./gateway-session.js";
import {
  type ChannelFacts,
  discordThreadSessionKey,
  type IntakeContext,
  isDirectMessage,
  isUserMessage,
  mayConcernBot,
  THREAD_CHANNEL_TYPES,
  toInboundMessage,
} from "./inbound.js";
import {
  DEFAULT_DISCORD_TIMING,
  DISCORD_INTENTS,
  type DiscordAdapterOptions,
  type DiscordTiming,
  FATAL_CLOSES,
  UNAUTHORIZED_TEXT,
} from "./options.js";
import { createDiscordProgress } from "./progress.js";
import { DiscordSender, describeDiscordError } from "./send.js";
import { DiscordSlashCommands } from "./slash-commands.js";
import { snowflakeTime } from "./snowflake.js";

/** Resolves once either signal aborts. */
function untilAborted(a: AbortSignal, b: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (a.aborted || b.aborted) return resolve();
    a.addEventListener("abort", () => resolve(), { once: true });
    b.addEventListener("abort", () => resolve(), { once: true });
  });
}

/** Resolves after `ms`, or as soon as `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return delay(ms, undefined, signal && { signal }).catch(() => {});
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
  /** Channel facts learned from GUILD_CREATE, THREAD_CREATE and lookups. */
  private readonly channels: DiscordChannels;
  private readonly catchUp: DiscordCatchUp;
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
  private firstConnection: (() => void) | null = null;
  private readonly slash: DiscordSlashCommands;
  /** Connections closed by Keel (rebuilt or stopping): their session reports are ignored. */
  private readonly retired = new WeakSet<WebSocketManager>();

  constructor(private readonly options: DiscordAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_DISCORD_TIMING, ...options.timing };
    this.health = new ConnectionState("discord", options, this.timing, {
      // Heartbeats keep a held connection talking; a standby (another gateway holds it) is quiet.
      stalledAfterMs: options.connection ? undefined : this.timing.deafAfterMs,
    });
    this.rest = new REST({
      api: options.apiRoot,
      version: "10",
      timeout: this.timing.restTimeoutMs,
    }).setToken(options.token);
    this.sender = new DiscordSender(this.rest, this.logger);
    this.channels = new DiscordChannels(this.rest, this.sender, this.logger);
    this.previewRest = new REST({
      api: options.apiRoot,
      version: "10",
      timeout: this.timing.restTimeoutMs,
      rejectOnRateLimit: () => true,
      retries: 0,
    }).setToken(options.token);
    this.progressView = options.progress
      ? createDiscordProgress(this.sender, this.previewRest, {
          ...options.progress,
          logger: this.logger,
          signal: this.health.stopSignal,
        })
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
    this.slash = new DiscordSlashCommands({
      rest: this.rest,
      logger: this.logger,
      access: this.access,
      store: options.store,
      channels: this.channels,
      sink: () => this.sink,
    });
    this.catchUp = new DiscordCatchUp({
      store: options.store,
      timing: this.timing,
      freeChannels: this.freeChannels,
      logger: this.logger,
      rest: this.rest,
      channelInfo: (channelId) => this.channels.info(channelId),
      toInbound: (message, backlog) => this.toInbound(message, backlog),
      receiveTogether: (messages) => this.receiveTogether(messages),
    });
  }

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

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
  readonly progress: PlatformAdapter["progress"] = (update) =>
    this.progressView?.onProgress(update);

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
        void this.slash.register(payload.d.application.id);
        // A new session numbers its events from 1 again.
        this.failedSeq = null;
        await this.catchUp.catchUpIfNeeded(this.session.takeLoss());
        return;
      }
      case GatewayDispatchEvents.Resumed:
        this.onConnected("resumed");
        // Resumed: nothing of this session was missed; an unfinished catch-up still runs.
        this.session.takeLoss();
        await this.catchUp.catchUpIfNeeded(null);
        return;
      case GatewayDispatchEvents.GuildCreate: {
        const d = payload.d as { id: string; channels?: APIChannel[]; threads?: APIChannel[] };
        for (const channel of [...(d.channels ?? []), ...(d.threads ?? [])]) {
          this.channels.note(channel, d.id);
        }
        return;
      }
      case GatewayDispatchEvents.ThreadCreate:
      case GatewayDispatchEvents.ThreadUpdate:
      case GatewayDispatchEvents.ChannelCreate:
      case GatewayDispatchEvents.ChannelUpdate:
        this.channels.note(payload.d as APIChannel);
        return;
      case GatewayDispatchEvents.InteractionCreate: {
        const command = slashCommandOf(payload.d as APIInteraction);
        if (command) await this.slash.take(command);
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
      const cached = this.channels.known(message.channel_id);
      const freeParent =
        cached?.parentId !== undefined &&
        THREAD_CHANNEL_TYPES.has(cached.type) &&
        this.freeChannels.has(cached.parentId);
      if (!mayConcernBot(message, context, ours || freeParent)) return null;
      const info = ours ? { type: 11 } : await this.channels.info(message.channel_id);
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
}
