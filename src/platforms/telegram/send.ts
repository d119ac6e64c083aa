/**
 * Sending to Telegram with grammY's retry rules: 429 waits `retry_after`, network errors and 5xx
 * back off (bounded), other 4xx fail at once. Stopping the adapter cuts the waits short.
 */
import { type Api, GrammyError, HttpError } from "grammy";
import type { InlineKeyboardMarkup } from "grammy/types";
import type { Logger } from "pino";
import type { ChatAddress, OutboundReply } from "../../contract/platform.js";
import { backoffMs } from "../../lib/net.js";
import { RECONNECT_JITTER } from "../kit/connection-state.js";
import { htmlToPlainText, markdownToTelegramHtml, splitMessage } from "./format.js";

/** Retry limits for one Telegram call. */
export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A flood wait longer than this fails the call instead of blocking the sender. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  maxAttempts: 5,
  baseDelayMs: 500,
  maxDelayMs: 10_000,
  maxRetryAfterMs: 60_000,
};

/** Resolves after `ms`, or rejects as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new Error("stopped"));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new Error("stopped"));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** How long to wait before retrying after `err`, or null when it must not be retried. */
export function retryDelayMs(err: unknown, attempt: number, policy: RetryPolicy): number | null {
  const backoff = backoffMs(attempt, policy.baseDelayMs, policy.maxDelayMs, RECONNECT_JITTER);
  if (err instanceof HttpError) return backoff;
  if (!(err instanceof GrammyError)) return null;
  if (err.error_code === 429) {
    const waitMs = (err.parameters.retry_after ?? 1) * 1000;
    return waitMs <= policy.maxRetryAfterMs ? waitMs : null;
  }
  return err.error_code >= 500 ? backoff : null;
}

/** True when Telegram rejected the message's HTML markup. */
export function isMarkupError(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /can't parse entities/i.test(err.description)
  );
}

/** Describes a Telegram failure in one line, without secrets (grammY messages omit the token). */
export function describeTelegramError(err: unknown): string {
  if (err instanceof GrammyError) return `${err.error_code} ${err.description}`;
  if (err instanceof HttpError) return `network error: ${String(err.error)}`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * Runs `call` until it succeeds, retrying per `policy`. Throws the last error when it is not
 * retryable, attempts run out, or `signal` aborts (the first attempt always runs).
 */
export async function withRetry<T>(
  call: () => Promise<T>,
  options: { policy: RetryPolicy; signal: AbortSignal; logger: Logger; method: string },
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      const delayMs = retryDelayMs(err, attempt, options.policy);
      if (delayMs === null || attempt >= options.policy.maxAttempts || options.signal.aborted) {
        throw err;
      }
      options.logger.warn(
        { method: options.method, attempt, delayMs, error: describeTelegramError(err) },
        "telegram call failed, retrying",
      );
      try {
        await sleep(delayMs, options.signal);
      } catch {
        // Stopped while waiting: report the failure that made us wait.
        throw err;
      }
    }
  }
}

/** Delivers replies: Markdown to HTML, split to Telegram's limit, sent piece by piece. */
export class TelegramSender {
  /** Pieces already sent per outbox row, so a retried delivery does not repeat them. */
  private readonly progress = new Map<number, number>();
  /**
   * Approval cards sent by this process (approval id → chat and message), so an answer given
   * elsewhere (`/approve`, HTTP, timeout) can edit the card. Cards from an earlier process are
   * edited when their button is pressed.
   */
  private readonly cards = new Map<string, { chatId: string; messageId: number }>();

  constructor(
    private readonly api: Api,
    private readonly logger: Logger,
    private readonly policy: RetryPolicy,
    private readonly signal: AbortSignal,
  ) {}

  /** Sends every piece of `reply`; throws when Telegram does not accept one (after retries). */
  async deliver(reply: OutboundReply): Promise<void> {
    const pieces = splitMessage(markdownToTelegramHtml(reply.text));
    const first = this.progress.get(reply.outboxId) ?? 0;
    const keyboard = reply.approvalId ? approvalKeyboard(reply.approvalId) : undefined;
    for (let index = first; index < pieces.length; index++) {
      const markup = index === pieces.length - 1 ? keyboard : undefined;
      try {
        const messageId = await this.sendPiece(reply.address, pieces[index]!, index === 0, markup);
        if (markup && reply.approvalId)
          this.rememberCard(reply.approvalId, reply.address, messageId);
      } catch (err) {
        this.rememberProgress(reply.outboxId, index);
        throw new Error(`Telegram did not accept the reply: ${describeTelegramError(err)}`, {
          cause: err,
        });
      }
    }
    this.progress.delete(reply.outboxId);
  }

  /** Replaces a sent message's text (and drops its buttons); used for answered approval cards. */
  async editCardText(chatId: string, messageId: number, text: string): Promise<void> {
    const html = splitMessage(markdownToTelegramHtml(text))[0] ?? "";
    await withRetry(
      () => this.api.editMessageText(chatId, messageId, html, { parse_mode: "HTML" }),
      { policy: this.policy, signal: this.signal, logger: this.logger, method: "editMessageText" },
    );
  }

  /**
   * Edits this process's card for `approvalId` to `text` (its buttons go); false when this
   * process sent no such card.
   */
  async editCard(approvalId: string, text: string): Promise<boolean> {
    const card = this.cards.get(approvalId);
    if (!card) return false;
    this.cards.delete(approvalId);
    await this.editCardText(card.chatId, card.messageId, text);
    return true;
  }

  private rememberCard(approvalId: string, address: ChatAddress, messageId: number): void {
    if (this.cards.size >= 1000) {
      const oldest = this.cards.keys().next().value;
      if (oldest !== undefined) this.cards.delete(oldest);
    }
    this.cards.set(approvalId, { chatId: address.chatId, messageId });
  }

  /** Sends plain text (no markup) to a chat; used for pairing answers. */
  async sendPlain(address: ChatAddress, text: string): Promise<void> {
    await this.send(address, text, false, true);
  }

  private rememberProgress(outboxId: number, sent: number): void {
    if (sent === 0) return;
    if (this.progress.size >= 1000) {
      const oldest = this.progress.keys().next().value;
      if (oldest !== undefined) this.progress.delete(oldest);
    }
    this.progress.set(outboxId, sent);
  }

  /** Sends one HTML piece (plain text when Telegram rejects the markup); returns its message id. */
  async sendPiece(
    address: ChatAddress,
    html: string,
    isFirst: boolean,
    keyboard?: InlineKeyboardMarkup,
  ): Promise<number> {
    try {
      return await this.send(address, html, true, isFirst, keyboard);
    } catch (err) {
      if (!isMarkupError(err)) throw err;
      this.logger.warn(
        { chatId: address.chatId, error: describeTelegramError(err) },
        "telegram rejected markup, sending plain text",
      );
      return await this.send(address, htmlToPlainText(html), false, isFirst, keyboard);
    }
  }

  /**
   * Replaces a message's text (HTML, or plain when `html` is false or the markup is rejected),
   * with retries. False when the message is gone; an unchanged text counts as done.
   */
  async editText(
    address: ChatAddress,
    messageId: string,
    text: string,
    html: boolean,
  ): Promise<boolean> {
    const edit = (body: string, markup: boolean) =>
      withRetry(
        () =>
          this.api.editMessageText(
            address.chatId,
            Number(messageId),
            body,
            markup ? { parse_mode: "HTML" } : {},
          ),
        {
          policy: this.policy,
          signal: this.signal,
          logger: this.logger,
          method: "editMessageText",
        },
      );
    try {
      await edit(text, html);
      return true;
    } catch (err) {
      if (isNotModified(err)) return true;
      if (isMessageGone(err)) return false;
      if (!html || !isMarkupError(err)) throw err;
      try {
        await edit(htmlToPlainText(text), false);
        return true;
      } catch (plainErr) {
        if (isNotModified(plainErr)) return true;
        if (isMessageGone(plainErr)) return false;
        throw plainErr;
      }
    }
  }

  /** Deletes a message; one already gone (or too old to delete) is left as it is. */
  async remove(address: ChatAddress, messageId: string): Promise<void> {
    try {
      await withRetry(() => this.api.deleteMessage(address.chatId, Number(messageId)), {
        policy: this.policy,
        signal: this.signal,
        logger: this.logger,
        method: "deleteMessage",
      });
    } catch (err) {
      if (!(err instanceof GrammyError && err.error_code === 400)) throw err;
    }
  }

  private async send(
    address: ChatAddress,
    text: string,
    html: boolean,
    isFirst: boolean,
    keyboard?: InlineKeyboardMarkup,
  ): Promise<number> {
    const replyTo =
      isFirst && address.replyToMessageId !== undefined
        ? Number(address.replyToMessageId)
        : undefined;
    const other = {
      ...(html ? { parse_mode: "HTML" as const } : {}),
      ...(address.threadId !== undefined ? { message_thread_id: Number(address.threadId) } : {}),
      ...(replyTo !== undefined
        ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } }
        : {}),
      ...(keyboard ? { reply_markup: keyboard } : {}),
    };
    const sent = await withRetry(() => this.api.sendMessage(address.chatId, text, other), {
      policy: this.policy,
      signal: this.signal,
      logger: this.logger,
      method: "sendMessage",
    });
    return sent.message_id;
  }
}

/**
 * The three answers of an approval card. The callback data (`approve:<id>`,
 * `approve_session:<id>`, `deny:<id>`) is read back by parseApprovalData: a card sent by an older
 * process must still be understood, so it does not change.
 */
export function approvalKeyboard(approvalId: string): InlineKeyboardMarkup {
  // A budget pause (id `b-…`): its middle answer raises the budget for the period.
  const middle = approvalId.startsWith("b-") ? "⬆ Raise for the period" : "✅ This session";
  return {
    inline_keyboard: [
      [
        { text: "✅ Approve once", callback_data: `approve:${approvalId}` },
        { text: middle, callback_data: `approve_session:${approvalId}` },
      ],
      [{ text: "🚫 Deny", callback_data: `deny:${approvalId}` }],
    ],
  };
}

/** Reads `approve:<id>`, `approve_session:<id>` or `deny:<id>`; null for anything else. */
export function parseApprovalData(
  data: string | undefined,
): { decision: "approve" | "approve_session" | "deny"; approvalId: string } | null {
  const match = /^(approve|approve_session|deny):([A-Za-z0-9_-]{1,40})$/.exec(data ?? "");
  if (!match) return null;
  return {
    decision: match[1] as "approve" | "approve_session" | "deny",
    approvalId: match[2]!,
  };
}

/** Telegram's answer to an edit that changes nothing. */
export function isNotModified(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /message is not modified/i.test(err.description)
  );
}

/** The message to edit no longer exists (deleted by the user) or cannot be edited any more. */
function isMessageGone(err: unknown): boolean {
  return (
    err instanceof GrammyError &&
    err.error_code === 400 &&
    /message to edit not found|message can't be edited/i.test(err.description)
  );
}
