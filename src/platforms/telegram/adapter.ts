/**
 * Telegram through grammY long polling. The offset moves past an update only once the sink has
 * committed it to the inbox, so nothing is lost across crashes and nothing pending is dropped at
 * start (reliability-notes 2.1). grammY's own `bot.start()` marks an update as tried before its
 * handler runs, and would confirm a failed one, so the loop here drives `bot.api.getUpdates`
 * itself and hands each batch to the sink (see handleBatch).
 */
import { Bot, GrammyError } from "grammy";
import type { Update } from "grammy/types";
import type { Logger } from "pino";
import type {
  ChatAddress,
  InboundMessage,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
} from "../platform.js";
import { type PairingAccess, TelegramAccess } from "./access.js";
import { toInboundMessage } from "./inbound.js";
import {
  DEFAULT_RETRY_POLICY,
  describeTelegramError,
  type RetryPolicy,
  sleep,
  TelegramSender,
} from "./send.js";

/** What one update asks of the adapter, decided before anything is stored. */
type Intake =
  | { kind: "store"; inbound: InboundMessage }
  | { kind: "stranger"; userId: string; inbound: InboundMessage }
  | { kind: "skip" }
  | { kind: "failed"; err: unknown };

/** Keel's chat commands, registered with setMyCommands at start. */
export const TELEGRAM_COMMANDS = [
  { command: "new", description: "Start a fresh conversation" },
  { command: "stop", description: "Stop the running answer" },
  { command: "retry", description: "Answer the last message again" },
  { command: "restart", description: "Restart the gateway" },
  { command: "status", description: "Show gateway and session status" },
  { command: "help", description: "List commands" },
  { command: "sethome", description: "Make this chat the home channel" },
];

/** Waits and intervals; the defaults suit production, tests shorten them. */
export interface TelegramTiming {
  /** Long-poll duration of each getUpdates call. */
  pollTimeoutSec: number;
  /** Wait before polling again after a 409 (another poller on the token). */
  conflictRetryMs: number;
  /** First and largest backoff for network trouble and a failing sink. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  typingIntervalMs: number;
  /** Bound on stop(), and on how long start() waits for the first connection attempt. */
  stopTimeoutMs: number;
  startWaitMs: number;
  retry: RetryPolicy;
}

export const DEFAULT_TELEGRAM_TIMING: TelegramTiming = {
  pollTimeoutSec: 30,
  conflictRetryMs: 30_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 30_000,
  typingIntervalMs: 4_000,
  stopTimeoutMs: 3_000,
  startWaitMs: 10_000,
  retry: DEFAULT_RETRY_POLICY,
};

export interface TelegramAdapterOptions {
  token: string;
  apiRoot: string;
  /** Telegram user ids allowed without pairing. */
  allowedUsers: string[];
  groupSessionsPerUser: boolean;
  pairing: PairingAccess;
  logger: Logger;
  timing?: Partial<TelegramTiming>;
  /** Told each time status() changes (errors arise in the background, e.g. a 409 while polling). */
  onStatusChange?(status: PlatformStatus): void;
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
  private readonly stopController = new AbortController();
  private current: PlatformStatus = { state: "stopped", error: null };
  private sink: InboundSink | null = null;
  private loop: Promise<void> | null = null;
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
    this.bot = new Bot(options.token, {
      client: { apiRoot: options.apiRoot, timeoutSeconds: this.timing.pollTimeoutSec + 15 },
    });
    this.access = new TelegramAccess(options.allowedUsers, options.pairing);
    this.sender = new TelegramSender(
      this.bot.api,
      this.logger,
      this.timing.retry,
      this.stopController.signal,
    );
  }

  private get stopped(): boolean {
    return this.stopController.signal.aborted;
  }

  status(): PlatformStatus {
    return { ...this.current };
  }

  /** Starts connecting and polling in the background; resolves after the first attempt. */
  async start(sink: InboundSink): Promise<void> {
    if (this.loop || this.stopped) return;
    this.sink = sink;
    this.setStatus({ state: "starting", error: null });
    let firstAttempt: () => void = () => {};
    const attempted = new Promise<void>((resolve) => {
      firstAttempt = resolve;
    });
    this.loop = this.run(firstAttempt).catch((err: unknown) => {
      this.logger.error({ err }, "telegram polling crashed");
      this.setError(`Telegram polling stopped unexpectedly: ${describeTelegramError(err)}`);
    });
    await Promise.race([
      attempted,
      sleep(this.timing.startWaitMs, this.stopController.signal).catch(() => {}),
    ]);
  }

  /** Stops polling and confirms the committed offset; bounded by `stopTimeoutMs` twice at most. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopController.abort();
    this.pollController?.abort();
    if (this.loop) {
      const bound = sleep(this.timing.stopTimeoutMs).then(() => {
        this.logger.warn("telegram intake did not finish in time");
      });
      await Promise.race([this.loop, bound]);
      await this.confirmOffset();
    }
    this.setStatus({ state: "stopped", error: null });
    this.logger.info("telegram stopped");
  }

  /** Formats, splits and sends a reply; throws when Telegram ultimately does not accept it. */
  deliver(reply: OutboundReply): Promise<void> {
    return this.sender.deliver(reply);
  }

  /** Sends "typing" now and every few seconds until the returned function is called. */
  showTyping(address: ChatAddress): () => void {
    if (this.stopped) return () => {};
    const other =
      address.threadId !== undefined ? { message_thread_id: Number(address.threadId) } : {};
    const send = () => {
      this.bot.api.sendChatAction(address.chatId, "typing", other).catch((err: unknown) => {
        this.logger.debug({ error: describeTelegramError(err) }, "typing indicator failed");
      });
    };
    send();
    const timer = setInterval(send, this.timing.typingIntervalMs);
    return () => clearInterval(timer);
  }

  private setError(error: string): void {
    if (this.current.error !== error) this.logger.error({ error }, "telegram unavailable");
    this.setStatus({ state: "error", error });
  }

  private setStatus(next: PlatformStatus): void {
    const changed = next.state !== this.current.state || next.error !== this.current.error;
    this.current = next;
    if (changed) this.options.onStatusChange?.({ ...next });
  }

  private backoffMs(attempt: number): number {
    return Math.min(this.timing.backoffBaseMs * 2 ** (attempt - 1), this.timing.backoffMaxMs);
  }

  private async pause(ms: number): Promise<void> {
    await sleep(ms, this.stopController.signal).catch(() => {});
  }

  private async run(firstAttempt: () => void): Promise<void> {
    const connected = await this.connect(firstAttempt);
    firstAttempt();
    if (connected) await this.poll();
  }

  /** getMe, deleteWebhook (keeping pending updates) and setMyCommands, retried until it works. */
  private async connect(firstAttempt: () => void): Promise<boolean> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.bot.init(asGrammySignal(this.stopController.signal));
        await this.bot.api.deleteWebhook(
          { drop_pending_updates: false },
          asGrammySignal(this.stopController.signal),
        );
        await this.registerCommands();
        this.setStatus({ state: "connected", error: null });
        this.logger.info({ bot: this.bot.botInfo.username }, "telegram connected");
        return true;
      } catch (err) {
        if (this.stopped) return false;
        if (isTelegramError(err, 401)) {
          this.setError(UNAUTHORIZED_TEXT);
          return false;
        }
        const delayMs = this.backoffMs(attempt);
        this.setError(`Cannot reach Telegram (${describeTelegramError(err)}); retrying.`);
        firstAttempt();
        await this.pause(delayMs);
      }
    }
    return false;
  }

  private async registerCommands(): Promise<void> {
    try {
      await this.bot.api.setMyCommands(
        TELEGRAM_COMMANDS,
        undefined,
        asGrammySignal(this.stopController.signal),
      );
    } catch (err) {
      if (isTelegramError(err, 401)) throw err;
      this.logger.warn({ error: describeTelegramError(err) }, "telegram commands not registered");
    }
  }

  private async poll(): Promise<void> {
    while (!this.stopped) {
      const updates = await this.fetchUpdates();
      if (updates === "fatal") return;
      if (updates) await this.handleBatch(updates);
    }
  }

  /** One getUpdates call: the updates, null after a recoverable error (already waited), or fatal. */
  private async fetchUpdates(): Promise<Update[] | null | "fatal"> {
    const controller = new AbortController();
    this.pollController = controller;
    try {
      const offset = this.offset;
      const updates = await this.bot.api.getUpdates(
        { offset, timeout: this.timing.pollTimeoutSec, allowed_updates: ["message"] },
        asGrammySignal(controller.signal),
      );
      this.confirmedOffset = offset;
      if (this.current.state !== "connected") {
        this.setStatus({ state: "connected", error: null });
        this.logger.info("telegram polling resumed");
      }
      this.pollFailures = 0;
      return updates;
    } catch (err) {
      if (this.stopped) return "fatal";
      return (await this.recoverFromPollError(err)) ? null : "fatal";
    } finally {
      this.pollController = null;
    }
  }

  /** Reports a polling error and waits before the next attempt; false when polling must end. */
  private async recoverFromPollError(err: unknown): Promise<boolean> {
    if (isTelegramError(err, 401)) {
      this.setError(UNAUTHORIZED_TEXT);
      return false;
    }
    if (isTelegramError(err, 409)) {
      this.setError(CONFLICT_TEXT);
      await this.pause(this.timing.conflictRetryMs);
      return true;
    }
    this.pollFailures += 1;
    if (isTelegramError(err, 429) && err instanceof GrammyError) {
      await this.pause((err.parameters.retry_after ?? 1) * 1000);
      return true;
    }
    this.setError(`Cannot reach Telegram (${describeTelegramError(err)}); retrying.`);
    await this.pause(this.backoffMs(this.pollFailures));
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
    if (!sink || this.stopped) return;
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
      const delayMs = this.backoffMs(this.sinkFailures);
      this.logger.error(
        { err: outcome.reason, updateId: update.update_id, delayMs },
        "telegram message not stored, it will be redelivered",
      );
      await this.pause(delayMs);
      return;
    }
  }

  /** Decides what an update asks for: store it, answer a stranger, or nothing. */
  private async classify(update: Update): Promise<Intake> {
    const message = update.message;
    if (!message) return { kind: "skip" };
    const inbound = toInboundMessage(message, {
      groupSessionsPerUser: this.options.groupSessionsPerUser,
      botUsername: this.bot.botInfo.username,
    });
    if (!inbound || inbound.senderId === undefined) return { kind: "skip" };
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
      case "failed":
        throw intake.err;
      case "skip":
        return;
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
