/**
 * Sending to Slack without duplicates. `chat.postMessage` has no idempotency key, and the Web API
 * client's own retries have posted replies twice, so the client here never retries by itself
 * (`retries: 0`, rate limits rejected to us) and this module decides:
 *
 * - Every piece of a reply carries message metadata `keel_outbox` with the outbox row id and the
 *   piece number.
 * - A piece is *uncertain* when its request may have reached Slack without an answer reaching us
 *   (network error, timeout, 5xx), and every row queued before this process started is uncertain
 *   (the previous process may have died between the post and the "delivered" mark). Before an
 *   uncertain row is sent, the channel (or thread) is read back from shortly before the row was
 *   queued, and pieces found with its metadata are not posted again.
 * - A 429 and a Slack error answer (`ok: false`) mean nothing was posted: retried as is, 429 after
 *   its Retry-After.
 *
 * The look-back is the scarce call (`conversations.history` / `replies` may be limited to one a
 * minute for apps outside the Marketplace), which is why only uncertain rows use it.
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  WebAPIRequestError,
  type WebClient,
} from "@slack/web-api";
import type { Logger } from "pino";
import type { ChatAddress, OutboundReply } from "../../contract/platform.js";
import { escapeMrkdwn, markdownToMrkdwn, splitMrkdwn } from "./format.js";

/** The metadata event type Keel's replies carry. */
export const OUTBOX_EVENT_TYPE = "keel_outbox";

/** Retry limits for one Slack call. */
export interface SlackRetryPolicy {
  /** Attempts per call for rate limits (429). */
  maxAttempts: number;
  /** A Retry-After longer than this fails the call instead of blocking the chat. */
  maxRetryAfterMs: number;
  /** Pages of history read when looking for an earlier send. */
  maxLookbackPages: number;
  /** How far before the row's creation the look-back starts (clock slack). */
  lookbackMarginMs: number;
}

export const DEFAULT_SLACK_RETRY: SlackRetryPolicy = {
  maxAttempts: 5,
  maxRetryAfterMs: 120_000,
  maxLookbackPages: 5,
  lookbackMarginMs: 60_000,
};

/** True when the request may have been carried out although we got no answer. */
export function isUncertain(err: unknown): boolean {
  return err instanceof WebAPIRequestError || err instanceof WebAPIHTTPError;
}

/** Describes a Slack failure in one line, without secrets. */
export function describeSlackError(err: unknown): string {
  if (err instanceof WebAPIPlatformError) return `Slack error ${err.data.error}`;
  if (err instanceof WebAPIRateLimitedError) return `rate limited (retry after ${err.retryAfter}s)`;
  if (err instanceof WebAPIHTTPError) return `HTTP ${err.statusCode}`;
  if (err instanceof WebAPIRequestError) return `network error: ${err.original.message}`;
  return err instanceof Error ? err.message : String(err);
}

interface PostedPiece {
  outboxId: number;
  piece: number;
}

/** Reads Keel's outbox metadata from a message in a history answer, if it has any. */
function postedPiece(message: unknown): PostedPiece | null {
  const metadata = (message as { metadata?: { event_type?: string; event_payload?: unknown } })
    .metadata;
  if (metadata?.event_type !== OUTBOX_EVENT_TYPE) return null;
  const payload = metadata.event_payload as { outbox_id?: unknown; piece?: unknown } | undefined;
  const outboxId = Number(payload?.outbox_id);
  const piece = Number(payload?.piece);
  return Number.isInteger(outboxId) && Number.isInteger(piece) ? { outboxId, piece } : null;
}

/** Delivers replies: Markdown to mrkdwn, split to Slack's limit, posted piece by piece. */
export class SlackSender {
  /** Pieces already confirmed per outbox row, so a retried delivery does not repeat them. */
  private readonly progress = new Map<number, number>();
  /** Rows with a piece whose post may have reached Slack unanswered. */
  private readonly uncertain = new Set<number>();
  /** Streamed replies: the pieces a read-back found already posted (piece → ts). */
  private readonly foundBefore = new Map<number, Map<number, string>>();

  constructor(
    private readonly web: WebClient,
    private readonly logger: Logger,
    private readonly policy: SlackRetryPolicy,
    private readonly signal: AbortSignal,
    /** Rows queued before this time may have been sent by an earlier process. */
    private readonly startedAt: number,
  ) {}

  /**
   * Posts piece `index` of `reply` (already formatted) unless an earlier attempt did: when the
   * row may have been posted unanswered (or by an earlier process), the conversation is read back
   * once and a message carrying this piece's metadata is returned instead. Returns its `ts`.
   */
  async postPiece(reply: OutboundReply, index: number, text: string): Promise<string> {
    if (this.mayHaveBeenSent(reply)) {
      const found = await this.findPostedOrNone(reply);
      this.uncertain.delete(reply.outboxId);
      this.foundBefore.set(reply.outboxId, found);
      if (this.foundBefore.size > 1000) {
        const oldest = this.foundBefore.keys().next().value;
        if (oldest !== undefined) this.foundBefore.delete(oldest);
      }
    }
    const earlier = this.foundBefore.get(reply.outboxId)?.get(index);
    if (earlier !== undefined) return earlier;
    try {
      return await this.post(reply.address, text, { outboxId: reply.outboxId, piece: index });
    } catch (err) {
      if (isUncertain(err)) this.uncertain.add(reply.outboxId);
      throw err;
    }
  }

  /** Replaces a message's text (`ts`); false when the message is gone. */
  async update(address: ChatAddress, ts: string, text: string): Promise<boolean> {
    try {
      await this.call("chat.update", () =>
        this.web.chat.update({ channel: address.chatId, ts, text }),
      );
      return true;
    } catch (err) {
      if (err instanceof WebAPIPlatformError && err.data.error === "message_not_found") {
        return false;
      }
      throw err;
    }
  }

  /** Deletes a message; one already gone is fine. */
  async remove(address: ChatAddress, ts: string): Promise<void> {
    try {
      await this.call("chat.delete", () => this.web.chat.delete({ channel: address.chatId, ts }));
    } catch (err) {
      if (!(err instanceof WebAPIPlatformError && err.data.error === "message_not_found")) {
        throw err;
      }
    }
  }

  /** Sends every piece of `reply` not yet on Slack; throws when Slack did not take one. */
  async deliver(reply: OutboundReply): Promise<void> {
    const pieces = splitMrkdwn(markdownToMrkdwn(reply.text));
    let first = this.progress.get(reply.outboxId) ?? 0;
    if (this.mayHaveBeenSent(reply)) {
      const found = await this.findPostedOrNone(reply);
      while (found.has(first)) first += 1;
      if (found.size > 0) {
        this.logger.info(
          { outboxId: reply.outboxId, found: [...found.keys()] },
          "slack reply already posted before, not posting it again",
        );
      }
      this.uncertain.delete(reply.outboxId);
    }
    for (let index = first; index < pieces.length; index++) {
      try {
        await this.post(reply.address, pieces[index]!, { outboxId: reply.outboxId, piece: index });
      } catch (err) {
        this.remember(reply.outboxId, index, isUncertain(err));
        throw new Error(`Slack did not accept the reply: ${describeSlackError(err)}`, {
          cause: err,
        });
      }
    }
    this.progress.delete(reply.outboxId);
    this.uncertain.delete(reply.outboxId);
  }

  /** Posts plain text without metadata (pairing answers); throws what Slack answered. */
  async sendPlain(address: ChatAddress, text: string): Promise<void> {
    await this.post(address, escapeMrkdwn(text), null);
  }

  private mayHaveBeenSent(reply: OutboundReply): boolean {
    if (this.uncertain.has(reply.outboxId)) return true;
    return reply.createdAt !== undefined && reply.createdAt < this.startedAt;
  }

  private remember(outboxId: number, confirmed: number, uncertain: boolean): void {
    if (this.progress.size >= 1000) {
      const oldest = this.progress.keys().next().value;
      if (oldest !== undefined) this.progress.delete(oldest);
    }
    this.progress.set(outboxId, confirmed);
    if (uncertain) this.uncertain.add(outboxId);
  }

  /**
   * Like findPosted, but when Slack refuses the read-back itself (a `*:history` scope missing, a
   * channel the bot left) the row is posted without the check: a possible duplicate is better
   * than a reply that can never be sent. Network trouble and rate limits still throw (retried).
   */
  private async findPostedOrNone(reply: OutboundReply): Promise<Map<number, string>> {
    try {
      return await this.findPosted(reply);
    } catch (err) {
      if (!(err instanceof WebAPIPlatformError)) throw err;
      this.logger.warn(
        { outboxId: reply.outboxId, error: describeSlackError(err) },
        "slack history not readable; posting without checking for an earlier post",
      );
      return new Map();
    }
  }

  /** The pieces of this row already in the conversation (read back from Slack), piece → ts. */
  private async findPosted(reply: OutboundReply): Promise<Map<number, string>> {
    const { chatId: channel, threadId } = reply.address;
    const since = (reply.createdAt ?? Date.now()) - this.policy.lookbackMarginMs;
    const base = {
      channel,
      oldest: (Math.max(0, since) / 1000).toFixed(6),
      include_all_metadata: true,
      limit: 100,
    };
    const found = new Map<number, string>();
    let cursor: string | undefined;
    for (let page = 0; page < this.policy.maxLookbackPages; page++) {
      const args = { ...base, ...(cursor ? { cursor } : {}) };
      const answer = await this.call("history", () =>
        threadId !== undefined
          ? this.web.conversations.replies({ ...args, ts: threadId })
          : this.web.conversations.history(args),
      );
      for (const message of answer.messages ?? []) {
        const posted = postedPiece(message);
        const ts = (message as { ts?: string }).ts;
        if (posted?.outboxId === reply.outboxId && ts) found.set(posted.piece, ts);
      }
      cursor = answer.response_metadata?.next_cursor || undefined;
      if (!cursor) break;
    }
    return found;
  }

  /** Posts a message (mrkdwn text, with Keel's metadata when `mark` is given); returns its ts. */
  async post(address: ChatAddress, text: string, mark: PostedPiece | null): Promise<string> {
    const answer = await this.call("chat.postMessage", () =>
      this.web.chat.postMessage({
        channel: address.chatId,
        text,
        ...(address.threadId !== undefined ? { thread_ts: address.threadId } : {}),
        ...(mark
          ? {
              metadata: {
                event_type: OUTBOX_EVENT_TYPE,
                event_payload: { outbox_id: mark.outboxId, piece: mark.piece },
              },
            }
          : {}),
      }),
    );
    return answer.ts ?? "";
  }

  /** Runs one Web API call; a 429 waits its Retry-After and tries again (nothing was done). */
  private async call<T>(method: string, run: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (err) {
        if (!(err instanceof WebAPIRateLimitedError)) throw err;
        const waitMs = err.retryAfter * 1000;
        if (attempt >= this.policy.maxAttempts || waitMs > this.policy.maxRetryAfterMs) throw err;
        this.logger.warn({ method, attempt, waitMs }, "slack rate limit, waiting");
        try {
          await sleep(waitMs, undefined, { signal: this.signal });
        } catch {
          throw err;
        }
      }
    }
  }
}
