/** The sessions a store outage cut off, held back until their turns are resumed. */
import type { ClusterStore, LeaseToken, SessionStore, TurnStore } from "../sessions/store.js";
import type { RunnerOptions } from "./runner-options.js";

export interface CutOffOptions extends Pick<RunnerOptions, "sessionLeases"> {
  store: ClusterStore & SessionStore & TurnStore;
  /** Starts queued work again once a session is no longer held back. */
  pump(): void;
}

/**
 * Sessions whose turn started and then failed because the store did not answer (several
 * gateways only): the turn is still `running` in the record until the takeover sweep resumes
 * it, and nothing queued of the session may run before that resume.
 */
export class CutOffSessions {
  private readonly cutOff = new Set<string>();
  private cutOffCheck: NodeJS.Timeout | null = null;
  /** Leases of cut-off turns whose release the store refused: given up once it answers. */
  private unreleased: LeaseToken[] = [];
  private storeBackListeners: (() => void)[] = [];

  constructor(private readonly options: CutOffOptions) {}

  has(sessionKey: string): boolean {
    return this.cutOff.has(sessionKey);
  }

  /** The session's resume is queued: its work is no longer held back. */
  delete(sessionKey: string): void {
    this.cutOff.delete(sessionKey);
  }

  /** A cut-off turn's lease whose release the store refused: given up once the store answers. */
  keepUnreleased(lease: LeaseToken): void {
    this.unreleased.push(lease);
  }

  /**
   * Called when the store answers again after it cut turns of this gateway off, their leases
   * given up (several gateways: the takeover can resume them at once instead of at its sweep).
   */
  onStoreBack(listener: () => void): void {
    this.storeBackListeners.push(listener);
  }

  /**
   * Holds the session's queued work back until its cut-off turn is resumed (`resume`), or until
   * the record shows neither a running turn of it nor a resume to come (the failed write had
   * committed after all).
   */
  holdUntilResumed(sessionKey: string): void {
    this.cutOff.add(sessionKey);
    if (this.cutOffCheck) return;
    const every = Math.min((this.options.sessionLeases?.ttlMs ?? 3000) / 3, 1000);
    let checking = false;
    this.cutOffCheck = setInterval(() => {
      if (checking) return;
      checking = true;
      this.releaseSettled()
        .catch(() => {}) // Still not answering: the next tick looks again.
        .finally(() => {
          checking = false;
        });
    }, every);
    this.cutOffCheck.unref();
  }

  private async releaseSettled(): Promise<void> {
    const running = new Set((await this.options.store.listRunningTurns()).map((t) => t.sessionKey));
    // The store answers again: the cut-off turns' leases go now rather than at their TTL, and
    // the takeover is asked to resume those turns now.
    if (this.unreleased.length > 0) {
      while (this.unreleased.length > 0) {
        await this.options.store.releaseSessionLease(this.unreleased[0]!);
        this.unreleased.shift();
      }
      for (const listener of this.storeBackListeners) listener();
    }
    for (const key of [...this.cutOff]) {
      if (running.has(key)) continue;
      const session = await this.options.store.getSession(key);
      // No resume will come for a session recovery suspended: its next message starts afresh.
      if (!session?.resumePending || session.suspended) this.cutOff.delete(key);
    }
    if (this.cutOff.size === 0 && this.cutOffCheck) {
      clearInterval(this.cutOffCheck);
      this.cutOffCheck = null;
    }
    this.options.pump();
  }
}
