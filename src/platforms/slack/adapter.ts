/**
 * Slack through Socket Mode (`@slack/socket-mode`) and the Web API (`@slack/web-api`), without
 * Bolt: Bolt acknowledges an Events API envelope before any handler runs, so a crash after the
 * ack loses the event. Here an envelope is acknowledged only after its message is committed to
 * the inbox (or Keel decided it takes nothing from it); an envelope never acknowledged is
 * delivered again by Slack, and the inbox's key (channel + ts) turns a redelivery, and the
 * `message` / `app_mention` twin of one post, into the row already stored.
 *
 * The socket is reconnected by this adapter, not the library (its automatic reconnect can end in
 * an unhandled rejection when `apps.connections.open` fails): every connection asks
 * `apps.connections.open` for a fresh URL, with backoff after failures.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { LogLevel, type Logger as SlackLogger, SocketModeClient } from "@slack/socket-mode";
import { WebAPIPlatformError, WebClient } from "@slack/web-api";
import type { Logger } from "pino";
import type { InboundSink, OutboundReply, PlatformAdapter } from "../../contract/platform.js";
import type { SessionStore } from "../../sessions/store.js";
import { ChatAccess, type PairingAccess } from "../chat-access.js";
import { type ConnectingAdapterOptions, ConnectionState } from "../kit/connection-state.js";
import { missingSetting } from "../kit/missing-setting.js";
import type { ProgressView } from "../progress-view.js";
import {
  type SlackCandidate,
  type SlackIdentity,
  type SlackMessageEvent,
  toSlackCandidate,
} from "./inbound.js";
import { createSlackProgress, type SlackProgressSettings } from "./progress.js";
import {
  DEFAULT_SLACK_RETRY,
  describeSlackError,
  type SlackRetryPolicy,
  SlackSender,
} from "./send.js";

/** What the adapter reads from the store: pairing, and whether a thread already has a session. */
export type SlackStoreAccess = PairingAccess & SessionStore;

/** Waits and bounds; the defaults suit production, tests shorten them. */
export interface SlackTiming {
  /** First and largest wait before reconnecting after a failure. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Bound on stop(), and on how long start() waits for the first connection. */
  stopTimeoutMs: number;
  startWaitMs: number;
  /** A Web API request without an answer after this long fails (and counts as uncertain). */
  requestTimeoutMs: number;
  /** A socket that has not said `hello` after this long is closed and opened again. */
  helloTimeoutMs: number;
  /** The socket's health checks (the library's ping/pong timeouts). */
  clientPingTimeoutMs: number;
  serverPingTimeoutMs: number;
  retry: SlackRetryPolicy;
}

export const DEFAULT_SLACK_TIMING: SlackTiming = {
  backoffBaseMs: 1_000,
  backoffMaxMs: 30_000,
  stopTimeoutMs: 3_000,
  startWaitMs: 10_000,
  requestTimeoutMs: 30_000,
  helloTimeoutMs: 30_000,
  clientPingTimeoutMs: 5_000,
  serverPingTimeoutMs: 30_000,
  retry: DEFAULT_SLACK_RETRY,
};

export interface SlackAdapterOptions extends ConnectingAdapterOptions<SlackProgressSettings> {
  /** App-level token (xapp-…) for Socket Mode. */
  appToken: string | undefined;
  /** Bot token (xoxb-…) for the Web API. */
  botToken: string | undefined;
  /** Web API base URL (`https://slack.com/api/`). */
  apiRoot: string;
  /** Slack user ids allowed without pairing. */
  allowedUsers: string[];
  /** Slack user ids with operator rights (also allowed). */
  adminUsers: string[];
  store: SlackStoreAccess;
  timing?: Partial<SlackTiming>;
  now?: () => number;
}

/** One Socket Mode envelope as the client hands it over. */
interface Envelope {
  ack: (response?: Record<string, unknown>) => Promise<void>;
  envelope_id?: string;
  type: string;
  body?: { type?: string; event?: SlackMessageEvent };
  retry_num?: number;
  retry_reason?: string;
}

/** Slack answers that no retry will fix: the token or the app's setup is wrong. */
const FATAL_ERRORS = new Set([
  "invalid_auth",
  "not_authed",
  "account_inactive",
  "token_revoked",
  "token_expired",
  "not_allowed_token_type",
  "missing_scope",
]);

/** Bridges the SDKs' logger to pino; their `info` is chatty connection detail, kept at debug. */
function slackLogger(logger: Logger): SlackLogger {
  const line = (msg: unknown[]) => msg.map(String).join(" ");
  return {
    debug: (...msg: unknown[]) => logger.debug(line(msg)),
    info: (...msg: unknown[]) => logger.debug(line(msg)),
    warn: (...msg: unknown[]) => logger.warn(line(msg)),
    // Errors the adapter handles itself (a failed connection) are reported by it.
    error: (...msg: unknown[]) => logger.warn(line(msg)),
    setLevel: () => {},
    getLevel: () => (logger.isLevelEnabled("debug") ? LogLevel.DEBUG : LogLevel.INFO),
    setName: () => {},
  };
}

/**
 * The Slack platform adapter. Single use: after stop() it does not start again.
 * Never throws out of start() and never crashes the process for platform trouble; see status().
 */
export class SlackAdapter implements PlatformAdapter {
  readonly name = "slack";
  private readonly logger: Logger;
  private readonly timing: SlackTiming;
  private readonly access: ChatAccess;
  private readonly web: WebClient | null;
  private readonly socket: SocketModeClient | null;
  private readonly sender: SlackSender | null;
  private readonly progressView: ProgressView | null;
  private readonly health: ConnectionState;
  private sink: InboundSink | null = null;
  private identity: SlackIdentity | null = null;
  /** Per channel, the intake of the envelope before: a chat's messages are stored in order. */
  private readonly chains = new Map<string, Promise<void>>();

  constructor(private readonly options: SlackAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_SLACK_TIMING, ...options.timing };
    // Not `stalledAfterMs`: Slack is silent while nobody writes (its pings stay in the SDK).
    this.health = new ConnectionState("slack", options, this.timing, {
      crashLog: "slack connection loop crashed",
      crashStatus: (err) => `Slack stopped unexpectedly: ${describeSlackError(err)}`,
    });
    this.access = new ChatAccess("slack", options.allowedUsers, options.store, options.adminUsers);
    const sdkLogger = slackLogger(this.logger);
    const clientOptions = {
      slackApiUrl: options.apiRoot,
      // Every retry is this adapter's (and the outbox's) decision: see send.ts.
      retryConfig: { retries: 0 },
      rejectRateLimitedCalls: true,
      timeout: this.timing.requestTimeoutMs,
    };
    this.web = options.botToken
      ? new WebClient(options.botToken, { ...clientOptions, logger: sdkLogger })
      : null;
    this.socket = options.appToken
      ? new SocketModeClient({
          appToken: options.appToken,
          logger: sdkLogger,
          autoReconnectEnabled: false,
          clientPingTimeout: this.timing.clientPingTimeoutMs,
          serverPingTimeout: this.timing.serverPingTimeoutMs,
          clientOptions,
        })
      : null;
    this.sender = this.web
      ? new SlackSender(
          this.web,
          this.logger,
          this.timing.retry,
          this.health.stopSignal,
          (options.now ?? Date.now)(),
        )
      : null;
    this.progressView =
      this.web && this.sender && options.progress
        ? createSlackProgress(this.web, this.sender, {
            ...options.progress,
            logger: this.logger,
            signal: this.health.stopSignal,
          })
        : null;
    this.socket?.on("slack_event", (envelope: Envelope) => this.onEnvelope(envelope));
  }

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

  /** Connects in the background; resolves after the first attempt (or `startWaitMs`). */
  async start(sink: InboundSink): Promise<void> {
    this.sink ??= sink;
    const missing = missingSetting(this.options, {
      appToken: "platforms.slack.app_token (SLACK_APP_TOKEN)",
      botToken: "platforms.slack.bot_token (SLACK_BOT_TOKEN)",
    });
    const unconfigured = missing && `${missing} is not set; Slack needs both tokens.`;
    await this.health.start((attempted) => this.run(attempted), unconfigured);
  }

  /** Closes the socket; envelopes not yet acknowledged are delivered again by Slack. */
  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    if (this.socket) {
      const closed = this.socket.disconnect().catch(() => {});
      await Promise.race([closed, sleep(this.timing.stopTimeoutMs, undefined, { ref: false })]);
    }
    const loop = this.health.loop;
    if (loop)
      await Promise.race([loop, sleep(this.timing.stopTimeoutMs, undefined, { ref: false })]);
    await this.progressView?.stop();
    this.health.set("stopped");
    this.logger.info("slack stopped");
  }

  /** Formats, splits and posts a reply; throws when Slack did not take it (the outbox retries). */
  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.sender) throw new Error("Slack is not configured; the reply stays queued.");
    await (this.progressView ? this.progressView.deliver(reply) : this.sender.deliver(reply));
  }

  /** Shows a running turn's reply and tool activity as it happens (progress.ts). */
  readonly progress: PlatformAdapter["progress"] = (update) =>
    this.progressView?.onProgress(update);

  /** Who the bot is, then one socket connection after another until stopped. */
  private async run(firstAttempt: () => void): Promise<void> {
    for (let failures = 0; !this.health.stopped; ) {
      try {
        if (!this.identity) this.identity = await this.authenticate();
        await this.connectOnce(firstAttempt);
        failures = 0;
      } catch (err) {
        if (this.health.stopped) return;
        firstAttempt();
        if (err instanceof WebAPIPlatformError && FATAL_ERRORS.has(err.data.error)) {
          this.health.fail(
            `Slack rejected the app's tokens or setup (${err.data.error}). Check platforms.slack.app_token (SLACK_APP_TOKEN), platforms.slack.bot_token (SLACK_BOT_TOKEN) and the app's scopes, then restart Keel.`,
            { retrying: false },
          );
          return;
        }
        failures += 1;
        this.health.fail(`Cannot reach Slack (${describeSlackError(err)}); retrying.`);
      }
      if (this.health.stopped) return;
      // A dropped connection (Slack's `disconnect` refresh, a lost socket) reconnects after the
      // base wait; failures in a row back off further.
      await this.health.pause(this.health.backoffMs(Math.max(1, failures)));
    }
  }

  private async authenticate(): Promise<SlackIdentity> {
    const answer = await this.web!.auth.test();
    if (!answer.user_id) throw new Error("auth.test returned no user_id");
    this.logger.info({ bot: answer.user, team: answer.team }, "slack authenticated");
    return { userId: answer.user_id, botId: answer.bot_id ?? null };
  }

  /** One connection: a fresh URL, hello, then events until the socket closes. */
  private async connectOnce(firstAttempt: () => void): Promise<void> {
    const socket = this.socket!;
    const hello = socket.start();
    const waiting = new AbortController();
    const silent = sleep(this.timing.helloTimeoutMs, undefined, { signal: waiting.signal }).then(
      () => true,
      () => false,
    );
    try {
      if (await Promise.race([hello.then(() => false), silent])) {
        // Closing makes start() reject; that rejection is this error's, not another one.
        hello.catch(() => {});
        await socket.disconnect();
        throw new Error(
          `no hello on the Socket Mode connection within ${this.timing.helloTimeoutMs} ms`,
        );
      }
    } finally {
      waiting.abort();
    }
    // A close arrives as a later event, never before this continuation runs.
    const closed = new Promise<void>((resolve) => socket.once("disconnected", () => resolve()));
    if (this.health.stopped) {
      // stop() came while connecting: the library would keep this socket open.
      await socket.disconnect();
      return;
    }
    this.health.set("connected");
    this.health.sawEvent();
    this.logger.info("slack connected");
    // Previews an earlier process left mid-stream (a crash) are marked interrupted.
    void this.progressView?.sweep();
    firstAttempt();
    await closed;
    if (this.health.stopped) return;
    // Not connected while the next socket is opened (a pong missed, a refresh, a drop).
    this.health.set("starting");
    this.logger.info("slack socket closed; reconnecting");
  }

  /** Every envelope: events are taken in order per channel, everything else acknowledged. */
  private onEnvelope(envelope: Envelope): void {
    this.health.sawEvent();
    if (envelope.type !== "events_api") {
      // Slash commands and interactions are not used: acknowledged so Slack stops resending.
      this.acknowledge(envelope);
      return;
    }
    const channel = envelope.body?.event?.channel ?? "";
    const before = this.chains.get(channel) ?? Promise.resolve();
    const next = before.then(() => this.takeEvent(envelope));
    this.chains.set(channel, next);
    void next.finally(() => {
      if (this.chains.get(channel) === next) this.chains.delete(channel);
    });
  }

  /**
   * Stores what the envelope carries, then acknowledges it. When storing fails the envelope is
   * left unacknowledged, and Slack delivers it again.
   */
  private async takeEvent(envelope: Envelope): Promise<void> {
    // After stop() nothing is taken (the store may be closing); Slack delivers it again.
    if (this.health.stopped) return;
    try {
      if (!this.identity) throw new Error("event before auth.test answered");
      const event = envelope.body?.event;
      const candidate = event ? toSlackCandidate(event, this.identity) : null;
      if (candidate) await this.take(candidate);
    } catch (err) {
      this.logger.error(
        { err, envelope: envelope.envelope_id, retry: envelope.retry_num ?? 0 },
        "slack event not stored; Slack will deliver it again",
      );
      return;
    }
    this.acknowledge(envelope);
  }

  private acknowledge(envelope: Envelope): void {
    envelope.ack().catch((err: unknown) => {
      // The socket closed first: Slack redelivers, and the inbox recognises the message.
      this.logger.debug({ err, envelope: envelope.envelope_id }, "slack ack not sent");
    });
  }

  /** The mention gate, access, then the sink (or a pairing code for a stranger's DM). */
  private async take(candidate: SlackCandidate): Promise<void> {
    const { inbound } = candidate;
    if (!candidate.direct && !candidate.mentioned) {
      // In channels Keel answers when mentioned, and in threads it is already part of.
      if (!candidate.threadReply) return;
      if (!(await this.options.store.getSession(inbound.sessionKey))) return;
    }
    const userId = inbound.senderId!;
    if (await this.access.isAllowed(userId)) {
      if (this.access.isOperator(userId)) inbound.operator = true;
      await this.sink!.receive(inbound);
      return;
    }
    // Strangers in channels are ignored; in a DM they get a pairing code.
    if (!candidate.direct) return;
    const text = await this.access.pairingAnswer({
      userId,
      userName: null,
      chatId: inbound.chatId,
    });
    this.logger.info({ userId }, "slack pairing requested");
    try {
      await this.sender!.sendPlain({ platform: "slack", chatId: inbound.chatId }, text);
    } catch (err) {
      // Slack refused it (a closed DM, a missing scope): redelivery would not help.
      if (err instanceof WebAPIPlatformError) {
        this.logger.warn({ error: describeSlackError(err) }, "pairing answer not delivered");
        return;
      }
      throw err;
    }
  }
}
