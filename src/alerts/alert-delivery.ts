/**
 * Where raised and cleared alerts go: a webhook (POST JSON, retried with backoff, one at a time
 * so a clear never overtakes its raise) and a chat (a notice through the outbox, durable like any
 * reply). Both queue and return at once: a slow or dead receiver holds up nothing but itself.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { ChatAddress } from "../contract/platform.js";
import { backoffMs } from "../lib/net.js";
import type { AlertEvent } from "./alert-monitor.js";

export interface WebhookRetry {
  attempts: number;
  baseMs: number;
  maxMs: number;
  /** Bound on each request. */
  timeoutMs: number;
}

export const DEFAULT_WEBHOOK_RETRY: WebhookRetry = {
  attempts: 6,
  baseMs: 2_000,
  maxMs: 60_000,
  timeoutMs: 10_000,
};

export class WebhookSender {
  private chain: Promise<void> = Promise.resolve();
  private readonly stopping = new AbortController();

  constructor(
    private readonly url: string,
    private readonly logger: Logger,
    private readonly retry: WebhookRetry = DEFAULT_WEBHOOK_RETRY,
  ) {}

  send(event: AlertEvent): void {
    this.chain = this.chain.then(() => this.post(event));
  }

  /** Gives up on what is still queued (after the current request's bound at most). */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.chain;
  }

  private async post(event: AlertEvent): Promise<void> {
    for (let attempt = 1; attempt <= this.retry.attempts; attempt++) {
      if (this.stopping.signal.aborted) return;
      try {
        const response = await fetch(this.url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(event),
          signal: AbortSignal.any([
            this.stopping.signal,
            AbortSignal.timeout(this.retry.timeoutMs),
          ]),
        });
        await response.body?.cancel();
        if (response.ok) return;
        this.logger.warn({ alert: event.alert, status: response.status }, "alert webhook refused");
      } catch (err) {
        if (this.stopping.signal.aborted) return;
        this.logger.warn({ alert: event.alert, error: String(err) }, "alert webhook unreachable");
      }
      const wait = backoffMs(attempt, this.retry.baseMs, this.retry.maxMs, 0.2);
      await sleep(wait, undefined, { signal: this.stopping.signal }).catch(() => {});
    }
    this.logger.error({ alert: event.alert, state: event.state }, "alert webhook gave up");
  }
}

/**
 * The chat an alert goes to: `alerts.chat`, unless the alert is about that chat's platform being
 * down and another chat (a home channel) is on a platform that is up.
 */
export function chatFor(
  alert: string,
  configured: ChatAddress,
  others: readonly ChatAddress[],
): ChatAddress {
  const down = /^platform_down:(.+)$/.exec(alert)?.[1];
  if (down === undefined || configured.platform !== down) return configured;
  return others.find((a) => a.platform !== down) ?? configured;
}

/** `telegram:12345` → the chat; a thread after a second colon (`slack:C1:1712.0001`). */
export function parseAlertChat(value: string): ChatAddress {
  const [platform, chatId, threadId] = value.split(":");
  if (!platform || !chatId) {
    throw new Error(`alerts.chat must be "platform:chat" (e.g. telegram:12345), got "${value}"`);
  }
  return { platform, chatId, ...(threadId && { threadId }) };
}

/** The text of an alert in a chat. */
export function alertText(event: AlertEvent): string {
  const head = event.state === "raised" ? "⚠️ Alert" : "✅ Resolved";
  return `${head}: ${event.alert}\n${event.detail}`;
}

/** One GET of the heartbeat URL; a failure is logged, never retried (the next beat is the retry). */
export async function fetchHeartbeat(
  url: string,
  logger: Logger,
  timeoutMs: number,
): Promise<void> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    if (!response.ok) logger.warn({ status: response.status }, "alert heartbeat refused");
  } catch (err) {
    logger.warn({ error: String(err) }, "alert heartbeat unreachable");
  }
}
