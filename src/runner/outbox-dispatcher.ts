/**
 * Delivers queued replies and notices. A row is recorded before it is sent and marked delivered
 * after the platform confirms, so a crash in between sends it once more after the restart (the
 * one documented duplicate window). Order is kept within a chat; chats are served independently,
 * so a platform that hangs on one chat holds up nothing else.
 */
import type { Logger } from "pino";
import type { PlatformAdapter } from "../contract/platform.js";
import { PlatformRegistry } from "../contract/registry.js";
import type { CrashPoint } from "../lib/crash-point.js";
import { errorMessage } from "../lib/errors.js";
import {
  type ClusterStore,
  LeaseLostError,
  type LeaseToken,
  type OutboxItem,
  type OutboxStore,
} from "../sessions/store.js";

/** A chat's delivery lease while this gateway sends its rows; `lost` once it moved on. */
interface HeldChat {
  lease: LeaseToken;
  lost: boolean;
}

export interface OutboxDispatcherOptions {
  store: OutboxStore & ClusterStore;
  logger: Logger;
  crashPoint: CrashPoint;
  /** Attempts before a row is given up as `failed`. */
  maxAttempts?: number;
  /** Delay before retrying after a failed delivery. */
  retryDelayMs?: number;
  /**
   * How often to look for rows another process queued (`keel pairing approve` writes its notice
   * into state.db while the gateway runs); 0 turns the sweep off.
   */
  sweepMs?: number;
  /**
   * Set when several gateways share the store: a chat's rows are sent by the one gateway holding
   * that chat's delivery lease (owner = this gateway's id), so each is sent once and in order.
   */
  chatLeases?: { owner: string; ttlMs: number };
  /** Told of every send to a platform as it ends (traces). */
  onDelivery?(report: DeliveryReport): void;
}

/** One send of an outbox row to its platform. */
export interface DeliveryReport {
  turnId: number | null;
  platform: string;
  kind: "reply" | "notice";
  startedAt: number;
  endedAt: number;
  /** The platform's refusal; absent when it accepted the message. */
  error?: string;
}

export class OutboxDispatcher {
  /** The platforms started so far: rows of the others wait. */
  private readonly adapters = new PlatformRegistry();
  /** Chats with a delivery run under way: a pass leaves them to that run. */
  private readonly busyChats = new Set<string>();
  private flushing: Promise<void> | null = null;
  private dirty = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /**
   * Rows the platform accepted whose "delivered" mark the store refused (it did not answer: a
   * database restarting). Sent again they would show twice, so while this process lives the next
   * pass only marks them.
   */
  private readonly sentUnmarked = new Set<number>();

  constructor(private readonly options: OutboxDispatcherOptions) {}

  register(adapter: PlatformAdapter): void {
    this.adapters.add(adapter);
  }

  /** Schedules a delivery pass; cheap to call often. */
  kick(): void {
    if (this.stopped) return;
    this.startSweep();
    this.dirty = true;
    if (!this.flushing) {
      this.flushing = this.loop()
        .catch((err: unknown) => {
          // A store failure here must not become an unhandled rejection (it would end the
          // process); rows stay pending and the next kick or start tries again.
          if (!this.stopped) this.options.logger.error({ err }, "outbox pass failed");
          this.scheduleRetry();
        })
        .finally(() => {
          this.flushing = null;
          // A kick that came after the pass's last look (but before it settled) found it still
          // flushing and started nothing: look again, or its row would wait for the next kick.
          if (this.dirty) this.kick();
        });
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  /** From the first kick on, a pass every `sweepMs` picks up rows written by other processes. */
  private startSweep(): void {
    const every = this.options.sweepMs ?? 5000;
    if (this.sweepTimer || every <= 0) return;
    this.sweepTimer = setInterval(() => this.kick(), every);
    this.sweepTimer.unref();
  }

  /** Lists pending rows and starts one delivery run per idle chat; does not wait for them. */
  private async loop(): Promise<void> {
    while (this.dirty && !this.stopped) {
      this.dirty = false;
      const rows = await this.options.store.listPendingOutbox();
      const byChat = new Map<string, OutboxItem[]>();
      for (const row of rows) {
        if (!this.adapters.forAddress(row.address)) continue;
        const key = `${row.address.platform}:${row.address.chatId}:${row.address.threadId ?? ""}`;
        if (this.busyChats.has(key)) continue;
        byChat.set(key, [...(byChat.get(key) ?? []), row]);
      }
      for (const [key, chatRows] of byChat) {
        this.busyChats.add(key);
        this.deliverChat(key, chatRows)
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

  /**
   * Delivers a chat's rows; with a shared store only under the chat's delivery lease, and from a
   * fresh read taken under it (rows listed before may have been sent by the previous holder).
   * False when another gateway holds the chat: the sweep looks again.
   */
  private async deliverChat(key: string, rows: OutboxItem[]): Promise<boolean> {
    const leases = this.options.chatLeases;
    if (!leases) return this.deliverInOrder(rows, null);
    const { store } = this.options;
    const lease = await store.claimSessionLease(`outbox:${key}`, leases.owner, leases.ttlMs);
    if (!lease) return false;
    const held: HeldChat = { lease, lost: false };
    // Renewed while a long send runs (a big file, a platform that is slow to answer), so another
    // gateway does not take the chat over in the middle of it and send its rows again.
    const renewal = setInterval(() => {
      store.renewSessionLease(lease, leases.ttlMs).then(
        (renewed) => {
          if (!renewed) held.lost = true;
        },
        (err: unknown) => this.options.logger.warn({ err }, "delivery lease renewal failed"),
      );
    }, leases.ttlMs / 3);
    renewal.unref();
    try {
      const chat = rows[0]!.address;
      const fresh = (await store.listPendingOutbox(chat.platform)).filter(
        (r) => r.address.chatId === chat.chatId && r.address.threadId === chat.threadId,
      );
      // A row another live gateway queued is its to send (a turn's reply finishes the preview
      // that gateway streams): this run stops there, and that gateway's own pass sends it.
      // Unless that gateway lacks the chat's platform: it would never send it (nor stream there).
      const live = new Set(await store.listLiveInstances(2 * leases.ttlMs, chat.platform));
      const mine = (row: OutboxItem) =>
        !row.queuedBy || row.queuedBy === leases.owner || !live.has(row.queuedBy);
      const upTo = fresh.findIndex((row) => !mine(row));
      const completed = await this.deliverInOrder(upTo < 0 ? fresh : fresh.slice(0, upTo), held);
      return completed && upTo < 0;
    } finally {
      clearInterval(renewal);
      await store.releaseSessionLease(lease);
    }
  }

  /** Delivers a chat's rows in order; false when one failed (later rows wait behind it). */
  private async deliverInOrder(rows: OutboxItem[], held: HeldChat | null): Promise<boolean> {
    for (const row of rows) {
      if (this.stopped || held?.lost) return false;
      if (!(await this.deliver(row, held))) return false;
    }
    return true;
  }

  private async deliver(row: OutboxItem, held: HeldChat | null): Promise<boolean> {
    if (this.sentUnmarked.has(row.id)) return this.markSent(row, held);
    const adapter = this.adapters.forAddress(row.address)!;
    const startedAt = Date.now();
    const report = (error?: string) =>
      this.options.onDelivery?.({
        turnId: row.turnId,
        platform: row.address.platform,
        kind: row.kind,
        startedAt,
        endedAt: Date.now(),
        ...(error !== undefined && { error }),
      });
    try {
      await adapter.deliver({
        outboxId: row.id,
        sessionKey: row.sessionKey,
        sessionId: row.sessionId,
        address: row.address,
        text: row.text,
        kind: row.kind,
        ...(row.approvalId && { approvalId: row.approvalId }),
        turnId: row.turnId,
        ...(row.file && { file: row.file }),
        createdAt: row.createdAt,
      });
      report();
      this.options.crashPoint("after_reply_sent");
    } catch (err) {
      report(errorMessage(err));
      return this.failed(row, held, err);
    }
    return this.markSent(row, held);
  }

  /** Marks a row the platform accepted; when the store does not answer, remembers it was sent. */
  private async markSent(row: OutboxItem, held: HeldChat | null): Promise<boolean> {
    try {
      await this.options.store.markDelivered(row.id, held?.lease);
      this.sentUnmarked.delete(row.id);
      return true;
    } catch (err) {
      if (this.stopped) return false;
      if (err instanceof LeaseLostError) return this.failed(row, held, err);
      this.sentUnmarked.add(row.id);
      this.options.logger.warn(
        { err, outboxId: row.id, platform: row.address.platform },
        "sent, but the store did not record it; it is marked (not sent again) at the next pass",
      );
      this.scheduleRetry();
      return false;
    }
  }

  /** A send (or a mark) that failed: counted as a failed attempt, retried later. */
  private async failed(row: OutboxItem, held: HeldChat | null, err: unknown): Promise<boolean> {
    // Stopped while sending (the store may be closed already): the row stays pending.
    if (this.stopped) return false;
    if (err instanceof LeaseLostError) {
      // Another gateway took the chat over meanwhile: its fresh read decides what is still to
      // send (this row may go out once more, as after a crash), and this one marks nothing.
      if (held) held.lost = true;
      this.options.logger.warn(
        { outboxId: row.id, platform: row.address.platform },
        "the chat's delivery lease moved to another gateway during the send; leaving the row to it",
      );
      return false;
    }
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

  private scheduleRetry(): void {
    if (this.retryTimer || this.stopped) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.kick();
    }, this.options.retryDelayMs ?? 2000);
    this.retryTimer.unref();
  }
}
