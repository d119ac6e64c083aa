/**
 * Sending to Telegram with grammY's retry rules: 429 waits `retry_after`, network errors and 5xx
 * back off (bounded), other 4xx fail at once. Stopping the adapter cuts the waits short.
 */
import { type Api, GrammyError, HttpError } from "grammy";
import type { Logger } from "pino";
import type { ChatAddress, OutboundReply } from "../platform.js";
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
  const backoff = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
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
    for (let index = first; index < pieces.length; index++) {
      try {
        await this.sendPiece(reply.address, pieces[index]!, index === 0);
      } catch (err) {
        this.rememberProgress(reply.outboxId, index);
        throw new Error(`Telegram did not accept the reply: ${describeTelegramError(err)}`, {
          cause: err,
        });
      }
    }
    this.progress.delete(reply.outboxId);
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

  private async sendPiece(address: ChatAddress, html: string, isFirst: boolean): Promise<void> {
    try {
      await this.send(address, html, true, isFirst);
    } catch (err) {
      if (!isMarkupError(err)) throw err;
      this.logger.warn(
        { chatId: address.chatId, error: describeTelegramError(err) },
        "telegram rejected markup, sending plain text",
      );
      await this.send(address, htmlToPlainText(html), false, isFirst);
    }
  }

  private async send(
    address: ChatAddress,
    text: string,
    html: boolean,
    isFirst: boolean,
  ): Promise<void> {
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
    };
    await withRetry(() => this.api.sendMessage(address.chatId, text, other), {
      policy: this.policy,
      signal: this.signal,
      logger: this.logger,
      method: "sendMessage",
    });
  }
}
