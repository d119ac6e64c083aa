/**
 * Telegram through grammY long polling. The offset moves past an update only once the sink has
 * committed it to the inbox, so nothing is lost across crashes and nothing pending is dropped at
 * start (docs/crash-safety.md). grammY's own `bot.start()` marks an update as tried before its
 * handler runs, and would confirm a failed one, so the loop here drives `bot.api.getUpdates`
 * itself and hands each batch to the sink (see handleBatch).
 */

import { Bot, GrammyError } from "grammy";
import type { CallbackQuery, Update } from "grammy/types";
import type { Logger } from "pino";
import type {
  ChatAddress,
  ConnectionLease,
  InboundAttachment,
  InboundMessage,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
} from "../../contract/platform.js";
import { createNodeFetch } from "../../lib/node-fetch.js";
import { commandMenu } from "../kit/command-menu.js";
import {
  type AdapterTiming,
  type ConnectingAdapterOptions,
  ConnectionState,
} from "../kit/connection-state.js";
import type { ProgressView } from "../progress-view.js";
import { typingSchedule } from "../typing.js";
import { type PairingAccess, TelegramAccess } from "./access.js";
import { TelegramFiles } from "./files.js";
import { toInboundMessage } from "./inbound.js";
import { createTelegramProgress, type TelegramProgressSettings } from "./progress.js";
import {
  DEFAULT_RETRY_POLICY,
  describeTelegramError,
  parseApprovalData,
  type RetryPolicy,
  sleep,
  TelegramSender,
} from "./send.js";

/** What one update asks of the adapter, decided before anything is stored. */
type Intake =
  | { kind: "store"; inbound: InboundMessage }
  | { kind: "press"; query: CallbackQuery }
  | { kind: "stranger"; userId: string; inbound: InboundMessage }
  | { kind: "skip" }
  | { kind: "failed"; err: unknown };

/** Keel's chat commands, registered with setMyCommands at start. */
export const TELEGRAM_COMMANDS = commandMenu({ place: "chat", approvals: true }).map(
  ({ name, description }) => ({ command: name, description }),
);

/** Waits and intervals; the defaults suit production, tests shorten them. */
export interface TelegramTiming extends AdapterTiming {
  /** Long-poll duration of each getUpdates call. */
  pollTimeoutSec: number;
  /**
   * A long poll still unanswered this long after its timeout is stalled (a half-open connection,
   * a proxy holding it): it is aborted and the poll opened again from the same offset.
   */
  pollMarginMs: number;
  /** Wait before polling again after a 409 (another poller on the token). */
  conflictRetryMs: number;
  retry: RetryPolicy;
}

export const DEFAULT_TELEGRAM_TIMING: TelegramTiming = {
  pollTimeoutSec: 30,
  pollMarginMs: 15_000,
  conflictRetryMs: 30_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 30_000,
  typingIntervalMs: 4_000,
  typingDelayMs: 1_000,
  stopTimeoutMs: 3_000,
  startWaitMs: 10_000,
  retry: DEFAULT_RETRY_POLICY,
};

export interface TelegramAdapterOptions extends ConnectingAdapterOptions<TelegramProgressSettings> {
  token: string;
  apiRoot: string;
  /** Telegram user ids allowed without pairing. */
  allowedUsers: string[];
  /** Telegram user ids with operator rights (also allowed). */
  adminUsers?: string[];
  groupSessionsPerUser: boolean;
  pairing: PairingAccess;
  timing?: Partial<TelegramTiming>;
  /**
   * Several gateways on one store: this one polls only while it holds the bot's poller lease
   * (it sends either way). Without it, it polls from the start.
   */
  poller?: ConnectionLease;
}

const UNAUTHORIZED_TEXT =
  "Telegram rejected the bot token (401 Unauthorized). Check platforms.telegram.token (TELEGRAM_BOT_TOKEN) and restart Keel.";
const CONFLICT_TEXT =
  "Another program is polling Telegram with this bot token (409 Conflict). Stop the other bot instance; Keel keeps retrying.";

/** grammY's Node build types signals with the abort-controller polyfill; Node's are compatible. */
type GrammySignal = Parameters<Bot["api"]["getMe"]>[0];
function asGrammySignal(signal: AbortSignal): GrammySignal {
  return signal as unknown as GrammySignal;
}

function isTelegramError(err: unknown, code: number): boolean {
  return err instanceof GrammyError && err.error_code === code;
}

/**
 * The Telegram platform adapter. Single use: after stop() it does not start again.
 * Never throws out of start() and never crashes the process for platform trouble; see status().
 */
export class TelegramAdapter implements PlatformAdapter {
  readonly name = "telegram";
  private readonly bot: Bot;
  private readonly logger: Logger;
  private readonly timing: TelegramTiming;
  private readonly access: TelegramAccess;
  private readonly sender: TelegramSender;
  private readonly files: TelegramFiles;
  private readonly progressView: ProgressView | null;
  private readonly health: ConnectionState;
  private sink: InboundSink | null = null;
  private pollController: AbortController | null = null;
  /** Every update below this id has been committed by the sink. */
  private offset = 0;
  /** The offset of the last answered getUpdates call: what Telegram surely counts as confirmed. */
  private confirmedOffset = 0;
  /** Consecutive getUpdates failures and sink failures, for backoff. */
  private pollFailures = 0;
  private sinkFailures = 0;

  constructor(private readonly options: TelegramAdapterOptions) {
    this.logger = options.logger.child({ component: "telegram" });
    this.timing = { ...DEFAULT_TELEGRAM_TIMING, ...options.timing };
    const owner = { logger: this.logger, onStatusChange: options.onStatusChange };
    this.health = new ConnectionState("telegram", owner, this.timing, {
      // Every long poll is answered within its timeout; a standby (another gateway polls) is quiet.
      stalledAfterMs: options.poller ? undefined : 2 * this.pollLimitMs(),
      crashLog: "telegram polling crashed",
      crashStatus: (err) => `Telegram polling stopped unexpectedly: ${describeTelegramError(err)}`,
    });
    this.bot = new Bot(options.token, {
      client: {
        apiRoot: options.apiRoot,
        // Above the poll's own stall limit, which aborts a hung long poll first (fetchUpdates).
        timeoutSeconds: Math.ceil(this.pollLimitMs() / 1000) + 5,
        fetch: createNodeFetch(),
      },
    });
    this.access = new TelegramAccess(
      options.allowedUsers,
      options.pairing,
      options.adminUsers ?? [],
    );
    this.sender = new TelegramSender(
      this.bot.api,
      this.logger,
      this.timing.retry,
      this.health.stopSignal,
    );
    this.files = new TelegramFiles({
      api: this.bot.api,
      token: options.token,
      apiRoot: options.apiRoot,
      policy: this.timing.retry,
      logger: this.logger,
      stopSignal: this.health.stopSignal,
    });
    this.progressView = options.progress
      ? createTelegramProgress(this.bot.api, this.sender, {
          ...options.progress,
          logger: this.logger,
          signal: this.health.stopSignal,
        })
      : null;
  }

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

  /** How long a long poll may take before it counts as stalled. */
  private pollLimitMs(): number {
    return this.timing.pollTimeoutSec * 1000 + this.timing.pollMarginMs;
  }

  /** Starts connecting and polling in the background; resolves after the first attempt. */
  async start(sink: InboundSink): Promise<void> {
    this.sink ??= sink;
    await this.health.start((attempted) => this.run(attempted));
  }

  /** Stops polling and confirms the committed offset; bounded by `stopTimeoutMs` twice at most. */
  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    this.pollController?.abort();
    await this.progressView?.stop();
    const loop = this.health.loop;
    if (loop) {
      const bound = sleep(this.timing.stopTimeoutMs).then(() => {
        this.logger.warn("telegram intake did not finish in time");
      });
      await Promise.race([loop, bound]);
      await this.confirmOffset();
    }
    // After the offset is confirmed: the next holder starts where this one ended.
    await this.options.poller?.release();
    this.health.set("stopped");
    this.logger.info("telegram stopped");
  }

  /** Formats, splits and sends a reply; throws when Telegram ultimately does not accept it. */
  deliver(reply: OutboundReply): Promise<void> {
    // A file is its own message: never the streamed reply's place.
    if (reply.file) return this.files.send(reply.address, reply.file, reply.text);
    return this.progressView ? this.progressView.deliver(reply) : this.sender.deliver(reply);
  }

  /** Shows a running turn's reply and tool activity as it happens (progress.ts). */
  readonly progress: PlatformAdapter["progress"] = (update) =>
    this.progressView?.onProgress(update);

  /** Downloads a file a user sent (see TelegramFiles). */
  fetchFile(attachment: InboundAttachment, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
    return this.files.download(attachment, maxBytes, signal);
  }

  /** Edits the approval card this process sent, if any (an answer given by `/approve`, HTTP, …). */
  async approvalAnswered(approvalId: string, text: string): Promise<void> {
    await this.sender.editCard(approvalId, text).catch((err: unknown) => {
      this.logger.warn({ error: describeTelegramError(err) }, "approval card not edited");
    });
  }

  /** Shows "typing" while a turn runs, once it has run for `typingDelayMs` (../typing.ts). */
  showTyping(address: ChatAddress): () => void {
    if (this.health.stopped) return () => {};
    const other =
      address.threadId !== undefined ? { message_thread_id: Number(address.threadId) } : {};
    const send = () => {
      this.bot.api.sendChatAction(address.chatId, "typing", other).catch((err: unknown) => {
        this.logger.debug({ error: describeTelegramError(err) }, "typing indicator failed");
      });
    };
    return typingSchedule(send, this.timing.typingDelayMs, this.timing.typingIntervalMs);
  }

  private async run(firstAttempt: () => void): Promise<void> {
    try {
      const connected = await this.connect(firstAttempt);
      firstAttempt();
      if (connected) await this.poll();
    } finally {
      // Polling ended without a stop (a rejected token, a bug): another gateway may poll.
      if (!this.health.stopped) await this.options.poller?.release();
    }
  }

  /** getMe, deleteWebhook (keeping pending updates) and setMyCommands, retried until it works. */
  private async connect(firstAttempt: () => void): Promise<boolean> {
    for (let attempt = 1; !this.health.stopped; attempt++) {
      try {
        await this.bot.init(asGrammySignal(this.health.stopSignal));
        await this.bot.api.deleteWebhook(
          { drop_pending_updates: false },
          asGrammySignal(this.health.stopSignal),
        );
        await this.registerCommands();
        this.health.set("connected");
        this.health.sawEvent();
        this.logger.info({ bot: this.bot.botInfo.username }, "telegram connected");
        // Previews a stop or crash cut off (in an earlier process too) get their mark.
        void this.progressView?.sweep();
        return true;
      } catch (err) {
        if (this.health.stopped) return false;
        if (isTelegramError(err, 401)) {
          this.health.fail(UNAUTHORIZED_TEXT, { retrying: false });
          return false;
        }
        const delayMs = this.health.backoffMs(attempt);
        this.health.fail(`Cannot reach Telegram (${describeTelegramError(err)}); retrying.`);
        firstAttempt();
        await this.health.pause(delayMs);
      }
    }
    return false;
  }

  private async registerCommands(): Promise<void> {
    try {
      await this.bot.api.setMyCommands(
        TELEGRAM_COMMANDS,
        undefined,
        asGrammySignal(this.health.stopSignal),
      );
    } catch (err) {
      if (isTelegramError(err, 401)) throw err;
      this.logger.warn({ error: describeTelegramError(err) }, "telegram commands not registered");
    }
  }

  /** Polls while this gateway holds the poller (always, alone); stands by while another does. */
  private async poll(): Promise<void> {
    while (!this.health.stopped) {
      const held = await this.holdPoller();
      if (!held) return;
      while (!this.health.stopped && !held.aborted) {
        const updates = await this.fetchUpdates(held);
        if (updates === "fatal") return;
        if (updates) await this.handleBatch(updates);
      }
      if (!this.health.stopped) this.logger.warn("telegram poller handed over; standing by");
    }
  }

  /** Resolves once this gateway may poll, with a signal that aborts when it may no longer. */
  private async holdPoller(): Promise<AbortSignal | null> {
    const lease = this.options.poller;
    if (!lease) return this.health.stopSignal;
    const held = await lease.acquire(this.health.stopSignal);
    // Telegram redelivers what the previous holder did not confirm; the inbox stores it once.
    if (held) this.logger.info("telegram poller taken: polling from the last confirmed offset");
    return held;
  }

  /** One getUpdates call: the updates, null after a recoverable error (already waited), or fatal. */
  private async fetchUpdates(held: AbortSignal): Promise<Update[] | null | "fatal"> {
    const controller = new AbortController();
    this.pollController = controller;
    const letGo = () => controller.abort();
    held.addEventListener("abort", letGo, { once: true });
    let stalled = false;
    const stallTimer = setTimeout(() => {
      stalled = true;
      controller.abort();
    }, this.pollLimitMs());
    try {
      const offset = this.offset;
      const updates = await this.bot.api.getUpdates(
        {
          offset,
          timeout: this.timing.pollTimeoutSec,
          allowed_updates: ["message", "callback_query"],
        },
        asGrammySignal(controller.signal),
      );
      this.confirmedOffset = offset;
      this.health.sawEvent();
      if (this.health.state !== "connected") {
        this.health.set("connected");
        this.logger.info("telegram polling resumed");
      }
      this.pollFailures = 0;
      return updates;
    } catch (err) {
      if (this.health.stopped) return "fatal";
      if (held.aborted) return null;
      if (stalled) {
        // Nothing was taken from the hung poll: the next one asks from the same offset.
        this.pollFailures += 1;
        const seconds = Math.round(this.pollLimitMs() / 1000);
        this.health.fail(`Telegram's long poll did not answer within ${seconds} s; polling again.`);
        await this.health.pause(this.health.backoffMs(this.pollFailures));
        return null;
      }
      return (await this.recoverFromPollError(err)) ? null : "fatal";
    } finally {
      clearTimeout(stallTimer);
      held.removeEventListener("abort", letGo);
      this.pollController = null;
    }
  }

  /** Reports a polling error and waits before the next attempt; false when polling must end. */
  private async recoverFromPollError(err: unknown): Promise<boolean> {
    if (isTelegramError(err, 401)) {
      this.health.fail(UNAUTHORIZED_TEXT, { retrying: false });
      return false;
    }
    if (isTelegramError(err, 409)) {
      this.health.fail(CONFLICT_TEXT);
      await this.health.pause(this.timing.conflictRetryMs);
      return true;
    }
    this.pollFailures += 1;
    if (isTelegramError(err, 429) && err instanceof GrammyError) {
      await this.health.pause((err.parameters.retry_after ?? 1) * 1000);
      return true;
    }
    this.health.fail(`Cannot reach Telegram (${describeTelegramError(err)}); retrying.`);
    await this.health.pause(this.health.backoffMs(this.pollFailures));
    return true;
  }

  /**
   * Stores a batch of updates. Access checks (which may read the store) run together; then every
   * update is handed over back to back, in update order, so their inbox commits share one
   * transaction. The offset advances past the longest prefix of updates that were handled; from
   * the first failure on, the batch is left for the next poll (redelivered updates that were
   * stored meanwhile are ignored by the inbox).
   */
  private async handleBatch(updates: Update[]): Promise<void> {
    const sink = this.sink;
    if (!sink || this.health.stopped) return;
    const intakes = await Promise.all(
      updates.map((update) =>
        this.classify(update).catch((err: unknown): Intake => ({ kind: "failed", err })),
      ),
    );
    const outcomes = await Promise.allSettled(intakes.map((intake) => this.take(intake, sink)));
    for (const [index, outcome] of outcomes.entries()) {
      const update = updates[index]!;
      if (outcome.status === "fulfilled") {
        this.offset = update.update_id + 1;
        this.sinkFailures = 0;
        continue;
      }
      this.sinkFailures += 1;
      const delayMs = this.health.backoffMs(this.sinkFailures);
      this.logger.error(
        { err: outcome.reason, updateId: update.update_id, delayMs },
        "telegram message not stored, it will be redelivered",
      );
      await this.health.pause(delayMs);
      return;
    }
  }

  /** Decides what an update asks for: store it, answer a stranger, or nothing. */
  private async classify(update: Update): Promise<Intake> {
    if (update.callback_query) return { kind: "press", query: update.callback_query };
    const message = update.message;
    if (!message) return { kind: "skip" };
    const inbound = toInboundMessage(message, {
      groupSessionsPerUser: this.options.groupSessionsPerUser,
      botUsername: this.bot.botInfo.username,
    });
    if (!inbound || inbound.senderId === undefined) return { kind: "skip" };
    if (this.access.isOperator(inbound.senderId)) inbound.operator = true;
    if (await this.access.isAllowed(inbound.senderId)) return { kind: "store", inbound };
    // Strangers in groups are ignored silently; in a private chat they get a pairing code.
    return message.chat.type === "private"
      ? { kind: "stranger", userId: inbound.senderId, inbound }
      : { kind: "skip" };
  }

  private async take(intake: Intake, sink: InboundSink): Promise<void> {
    switch (intake.kind) {
      case "store":
        await sink.receive(intake.inbound);
        return;
      case "stranger":
        return this.answerStranger(intake.userId, intake.inbound);
      case "press":
        return this.answerPress(intake.query, sink);
      case "failed":
        throw intake.err;
      case "skip":
        return;
    }
  }

  /**
   * An approval button: decided by the sink (committed before the offset moves on, so a crash
   * means Telegram redelivers the press and the store answers it once). The presser always gets
   * an answer; a press that decided edits the card to say who decided what.
   */
  private async answerPress(query: CallbackQuery, sink: InboundSink): Promise<void> {
    const press = parseApprovalData(query.data);
    const chatId = query.message?.chat.id;
    let toast = "This button is not Keel's.";
    let cardText: string | null = null;
    if (press && chatId !== undefined && sink.answerApproval) {
      const userId = String(query.from.id);
      const name = [query.from.first_name, query.from.last_name].filter(Boolean).join(" ");
      const result = await sink.answerApproval({
        ...press,
        platform: "telegram",
        userId,
        ...(name && { userName: name }),
        operator: this.access.isOperator(userId),
        chatId: String(chatId),
      });
      toast = result.toast;
      cardText = result.cardText;
    }
    await this.bot.api
      .answerCallbackQuery(query.id, { text: toast.slice(0, 200) })
      .catch((err: unknown) =>
        this.logger.warn({ error: describeTelegramError(err) }, "callback answer failed"),
      );
    if (cardText !== null && query.message && chatId !== undefined) {
      await this.sender
        .editCardText(String(chatId), query.message.message_id, cardText)
        .catch((err: unknown) =>
          this.logger.warn({ error: describeTelegramError(err) }, "approval card not edited"),
        );
    }
  }

  private async answerStranger(
    userId: string,
    inbound: { chatId: string; senderName?: string; address: ChatAddress },
  ): Promise<void> {
    const text = await this.access.pairingAnswer({
      userId,
      userName: inbound.senderName ?? null,
      chatId: inbound.chatId,
    });
    this.logger.info({ userId }, "telegram pairing requested");
    try {
      await this.sender.sendPlain(inbound.address, text);
    } catch (err) {
      // A refusal (blocked bot, deleted chat) will not get better on redelivery; anything else will.
      if (err instanceof GrammyError && err.error_code < 500 && err.error_code !== 429) {
        this.logger.warn({ error: describeTelegramError(err) }, "pairing answer not delivered");
        return;
      }
      throw err;
    }
  }

  /** Tells Telegram the committed offset, so handled updates are not redelivered after restart. */
  private async confirmOffset(): Promise<void> {
    if (this.offset <= this.confirmedOffset) return;
    const signal = AbortSignal.timeout(this.timing.stopTimeoutMs);
    for (let attempt = 1; attempt <= 3; attempt++) {
      try {
        await this.bot.api.getUpdates(
          { offset: this.offset, limit: 1, timeout: 0 },
          asGrammySignal(signal),
        );
        this.confirmedOffset = this.offset;
        return;
      } catch (err) {
        // The aborted long poll may still count as running for a moment: 409, try again.
        if (!isTelegramError(err, 409) || signal.aborted) {
          this.logger.warn({ error: describeTelegramError(err) }, "telegram offset not confirmed");
          return;
        }
        await sleep(100 * attempt, signal).catch(() => {});
      }
    }
  }
}
