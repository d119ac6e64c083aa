/**
 * Delivers queued replies and notices. A row is recorded before it is sent and marked delivered
 * after the platform confirms, so a crash in between sends it once more after the restart (the
 * one documented duplicate window). Order is kept within a chat; chats are served independently,
 * so a platform that hangs on one chat holds up nothing else.
 */
import type { Logger } from "pino";
import type { CrashPoint } from "../lib/crash-point.js";
import type { PlatformAdapter } from "../platforms/platform.js";
import type { OutboxItem, Store } from "../sessions/store.js";

export interface OutboxDispatcherOptions {
  store: Store;
  logger: Logger;
  crashPoint: CrashPoint;
  /** Attempts before a row is given up as `failed`. */
  maxAttempts?: number;
  /** Delay before retrying after a failed delivery. */
  retryDelayMs?: number;
}

export class OutboxDispatcher {
  private readonly adapters = new Map<string, PlatformAdapter>();
  /** Chats with a delivery run under way: a pass leaves them to that run. */
  private readonly busyChats = new Set<string>();
  private flushing: Promise<void> | null = null;
  private dirty = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly options: OutboxDispatcherOptions) {}

  register(adapter: PlatformAdapter): void {
    this.adapters.set(adapter.name, adapter);
  }

  /** Schedules a delivery pass; cheap to call often. */
  kick(): void {
    if (this.stopped) return;
    this.dirty = true;
    if (!this.flushing) {
      this.flushing = this.loop()
        .catch((err: unknown) => {
          // A store failure here must not become an unhandled rejection (it would end the
          // process); rows stay pending and the next kick or start tries again.
          if (!this.stopped) this.options.logger.error({ err }, "outbox pass failed");
          this.scheduleRetry();
        })
        .finally(() => (this.flushing = null));
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  /** Lists pending rows and starts one delivery run per idle chat; does not wait for them. */
  private async loop(): Promise<void> {
    while (this.dirty && !this.stopped) {
      this.dirty = false;
      const rows = await this.options.store.listPendingOutbox();
      const byChat = new Map<string, OutboxItem[]>();
      for (const row of rows) {
        if (!this.adapters.has(row.address.platform)) continue;
        const key = `${row.address.platform}:${row.address.chatId}:${row.address.threadId ?? ""}`;
        if (this.busyChats.has(key)) continue;
        byChat.set(key, [...(byChat.get(key) ?? []), row]);
      }
      for (const [key, chatRows] of byChat) {
        this.busyChats.add(key);
        this.deliverInOrder(chatRows)
          .catch((err: unknown) => {
            if (!this.stopped) this.options.logger.error({ err }, "outbox delivery run failed");
            this.scheduleRetry();
            return false;
          })
          .then((completed) => {
            this.busyChats.delete(key);
            // Rows queued for this chat meanwhile were skipped by other passes: look again
            // (after a failure the retry timer does, so a failing chat does not spin).
            if (completed) this.kick();
          });
      }
    }
  }

  /** Delivers a chat's rows in order; false when one failed (later rows wait behind it). */
  private async deliverInOrder(rows: OutboxItem[]): Promise<boolean> {
    for (const row of rows) {
      if (this.stopped) return false;
      if (!(await this.deliver(row))) return false;
    }
    return true;
  }

  private async deliver(row: OutboxItem): Promise<boolean> {
    const adapter = this.adapters.get(row.address.platform)!;
    try {
      await adapter.deliver({
        outboxId: row.id,
        sessionKey: row.sessionKey,
        sessionId: row.sessionId,
        address: row.address,
        text: row.text,
        kind: row.kind,
      });
      this.options.crashPoint("after_reply_sent");
      await this.options.store.markDelivered(row.id);
      return true;
    } catch (err) {
      // Stopped while sending (the store may be closed already): the row stays pending.
      if (this.stopped) return false;
      const maxAttempts = this.options.maxAttempts ?? 8;
      this.options.logger.warn(
        { err, outboxId: row.id, platform: row.address.platform, attempt: row.attempts + 1 },
        "delivery failed",
      );
      await this.options.store.markDeliveryFailed(row.id, maxAttempts);
      if (row.attempts + 1 >= maxAttempts) {
        this.options.logger.error(
          { outboxId: row.id, platform: row.address.platform },
          "delivery given up",
        );
      }
      this.scheduleRetry();
      return false;
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.kick();
    }, this.options.retryDelayMs ?? 2000);
    this.retryTimer.unref();
  }
}
