/**
 * The lease on a platform connection only one gateway may hold (the Telegram poller of a bot
 * token): a named row in the store's lease table, claimed by a standby every second or so,
 * renewed by its holder every quarter of the TTL. A holder that dies stops renewing, and a standby
 * claims it once the TTL has run out; a holder that cannot renew in time (a paused VM, a lost
 * database) gives the connection up by itself before its lease can have moved on.
 */
import { createHash } from "node:crypto";
import type { Logger } from "pino";
import type { ConnectionLease } from "../contract/platform.js";
import type { ClusterStore, LeaseToken } from "../sessions/store.js";

export type LeaseStore = ClusterStore;

/** The lease's name: the platform and a hash of the credential, never the credential itself. */
export function connectionLeaseKey(platform: string, credential: string): string {
  const hash = createHash("sha256").update(credential).digest("hex").slice(0, 16);
  return `poller:${platform}:${hash}`;
}

export interface StoreConnectionLeaseOptions {
  store: LeaseStore;
  key: string;
  /** This gateway's instance id. */
  owner: string;
  ttlMs: number;
  logger: Logger;
  /** How often a standby tries to claim; default min(TTL / 3, 1 s). */
  claimEveryMs?: number;
  /** Local clock for the self-fencing deadline (never compared with the database's). */
  now?: () => number;
}

export class StoreConnectionLease implements ConnectionLease {
  private held: LeaseToken | null = null;
  private lost: AbortController | null = null;
  private renewal: NodeJS.Timeout | null = null;
  /** Local time when the last successful claim or renewal was sent: the lease lasts TTL from it. */
  private renewedAt = 0;
  private readonly now: () => number;

  constructor(private readonly options: StoreConnectionLeaseOptions) {
    this.now = options.now ?? Date.now;
  }

  async acquire(signal: AbortSignal, onStandby?: () => void): Promise<AbortSignal | null> {
    if (this.held && this.lost) return this.lost.signal;
    const every = this.options.claimEveryMs ?? Math.min(this.options.ttlMs / 3, 1000);
    let waiting = false;
    while (!signal.aborted) {
      const sentAt = this.now();
      const lease = await this.options.store
        .claimSessionLease(this.options.key, this.options.owner, this.options.ttlMs)
        .catch((err: unknown) => {
          this.options.logger.warn(
            { err, lease: this.options.key },
            "connection lease claim failed",
          );
          return null;
        });
      if (lease) {
        // Stopped while claiming: the lease is not kept for a connection nobody will run.
        if (signal.aborted) {
          await this.options.store.releaseSessionLease(lease).catch(() => {});
          return null;
        }
        return this.hold(lease, sentAt);
      }
      if (!waiting) {
        waiting = true;
        this.options.logger.info(
          { lease: this.options.key },
          "another gateway holds this connection; standing by",
        );
        onStandby?.();
      }
      await sleep(every, signal);
    }
    return null;
  }

  async release(): Promise<void> {
    const held = this.held;
    this.lose();
    if (held) await this.options.store.releaseSessionLease(held).catch(() => {});
  }

  private hold(lease: LeaseToken, sentAt: number): AbortSignal {
    this.held = lease;
    this.renewedAt = sentAt;
    this.lost = new AbortController();
    this.renewal = setInterval(() => void this.renew(), this.options.ttlMs / 4);
    this.renewal.unref();
    this.options.logger.info(
      { lease: this.options.key, fence: lease.fence },
      "holding this connection for the gateways sharing the store",
    );
    return this.lost.signal;
  }

  private async renew(): Promise<void> {
    const held = this.held;
    if (!held) return;
    const sentAt = this.now();
    // Not renewed for three quarters of the TTL (renewals failing or hanging, or this process
    // was paused): give the connection up before the lease can have run out, so two gateways
    // never hold it at once. One failed renewal is tolerated.
    if (sentAt - this.renewedAt >= (this.options.ttlMs * 3) / 4) {
      this.options.logger.warn(
        { lease: this.options.key },
        "the connection's lease could not be renewed in time; letting the connection go",
      );
      this.lose();
      return;
    }
    try {
      const renewed = await this.options.store.renewSessionLease(held, this.options.ttlMs);
      if (this.held !== held) return;
      if (renewed) {
        this.renewedAt = sentAt;
        return;
      }
      this.options.logger.warn(
        { lease: this.options.key },
        "the connection's lease moved to another gateway; letting the connection go",
      );
      this.lose();
    } catch (err) {
      // The next tick tries again, or gives the connection up when it is too late.
      this.options.logger.warn({ err, lease: this.options.key }, "connection lease renewal failed");
    }
  }

  private lose(): void {
    if (this.renewal) clearInterval(this.renewal);
    this.renewal = null;
    this.held = null;
    this.lost?.abort();
    this.lost = null;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
