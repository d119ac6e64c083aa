/**
 * Delivers queued replies and notices. A row is recorded before it is sent and marked delivered
 * after the platform confirms, so a crash in between sends it once more after the restart (the
 * one documented duplicate window). Order is kept within a chat; chats are served in parallel.
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
  private readonly inFlight = new Set<number>();
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

  /** Resolves when the current delivery pass (if any) has finished. */
  async idle(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.stopped) {
      this.dirty = false;
      const rows = await this.options.store.listPendingOutbox();
      const byChat = new Map<string, OutboxItem[]>();
      for (const row of rows) {
        if (this.inFlight.has(row.id) || !this.adapters.has(row.address.platform)) continue;
        const key = `${row.address.platform}:${row.address.chatId}:${row.address.threadId ?? ""}`;
        byChat.set(key, [...(byChat.get(key) ?? []), row]);
      }
      await Promise.all([...byChat.values()].map((chatRows) => this.deliverInOrder(chatRows)));
    }
  }

  private async deliverInOrder(rows: OutboxItem[]): Promise<void> {
    for (const row of rows) {
      if (this.stopped) return;
      const ok = await this.deliver(row);
      if (!ok) return; // keep later rows of this chat behind the failed one
    }
  }

  private async deliver(row: OutboxItem): Promise<boolean> {
    const adapter = this.adapters.get(row.address.platform)!;
    this.inFlight.add(row.id);
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
    } finally {
      this.inFlight.delete(row.id);
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
