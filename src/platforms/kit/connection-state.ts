/**
 * A platform connection's state, held by each connecting adapter instead of re-implemented in
 * each: the status the gateway reports (`status()`), the change callback, the log line when the
 * platform becomes unavailable, the time of the last sign of life, the adapter's backoff, and its
 * stop signal with the waits that end on it. `report()` folds these into the connection health
 * of the contract (`ConnectionReport`).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { ConnectionReport, PlatformStatus } from "../../contract/platform.js";
import { backoffMs } from "../../lib/net.js";
import type { StreamStore } from "../progress-view.js";

/** The timing every connecting adapter has; each platform adds its own. */
export interface AdapterTiming {
  /** First and largest backoff after a failed connect, network trouble or a failing sink. */
  backoffBaseMs: number;
  backoffMaxMs: number;
  typingIntervalMs: number;
  /** A turn answered sooner than this shows no typing at all. */
  typingDelayMs: number;
  /** Bound on stop(), and on how long start() waits for the first connection. */
  stopTimeoutMs: number;
  startWaitMs: number;
}

/** What the gateway hands every connecting adapter besides its platform's own settings. */
export interface ConnectingAdapterOptions<ProgressSettings> {
  logger: Logger;
  /** Told each time status() changes (trouble arises in the background, a 409 while polling). */
  onStatusChange?(status: PlatformStatus): void;
  /**
   * Progress in the chat while a turn runs (`display.streaming`, `display.tool_progress`), with
   * the store that records the messages it shows. Without it, replies are sent when final.
   */
  progress?: { settings: ProgressSettings; store: StreamStore };
}

/**
 * Share of each reconnect wait drawn at random: gateways (and adapters) that lost the same
 * platform at once do not come back in step.
 */
export const RECONNECT_JITTER = 0.2;

export interface ConnectionStateOptions {
  /** The platform's name, as in its log lines ("telegram unavailable"). */
  platform: string;
  logger: Logger;
  onStatusChange?(status: PlatformStatus): void;
  /** First and largest wait between attempts. */
  backoff: { baseMs: number; maxMs: number };
  /**
   * Connected but silent for longer than this reads as `stalled`. Only for a platform that
   * speaks at a steady pace (a long poll's answers, heartbeats); omit where silence is normal.
   */
  stalledAfterMs?: number;
  now?: () => number;
}

export class ConnectionState {
  private current: PlatformStatus = { state: "stopped", error: null };
  /** False after an error the adapter does not retry (a rejected token): the platform is down. */
  private retrying = true;
  private lastEventAt: number | null = null;
  private readonly now: () => number;
  private readonly stopping = new AbortController();

  constructor(private readonly options: ConnectionStateOptions) {
    this.now = options.now ?? Date.now;
  }

  status(): PlatformStatus {
    return { ...this.current };
  }

  /** Aborts once the adapter stops: its waits, retries and requests end with it. */
  get stopSignal(): AbortSignal {
    return this.stopping.signal;
  }

  get stopped(): boolean {
    return this.stopping.signal.aborted;
  }

  /** The adapter is stopping: every wait on {@link stopSignal} ends now. The status stays. */
  stop(): void {
    this.stopping.abort();
  }

  /** Waits `ms`, or less when the adapter stops; never throws. */
  async pause(ms: number): Promise<void> {
    await sleep(ms, undefined, { signal: this.stopping.signal }).catch(() => {});
  }

  get state(): PlatformStatus["state"] {
    return this.current.state;
  }

  /** Sets the status; the change callback hears only real changes. */
  set(state: Exclude<PlatformStatus["state"], "error">): void {
    this.retrying = true;
    this.change({ state, error: null });
  }

  /**
   * Reports trouble, logged once per distinct error. `retrying: false` when the adapter has
   * given up until an operator acts.
   */
  fail(error: string, options: { retrying?: boolean } = {}): void {
    if (this.current.error !== error) {
      this.options.logger.error({ error }, `${this.options.platform} unavailable`);
    }
    this.retrying = options.retrying ?? true;
    this.change({ state: "error", error });
  }

  /**
   * Runs an adapter's connection loop in the background. `started` resolves after the loop's
   * first attempt (it calls `attempted`), after `waitMs`, or at the stop, whichever comes first.
   * A loop that throws is logged as `crashLog` and leaves the platform failed, not retrying, with
   * the status `crashStatus(err)`.
   */
  launch(
    run: (attempted: () => void) => Promise<void>,
    options: { waitMs: number; crashLog: string; crashStatus(err: unknown): string },
  ): { loop: Promise<void>; started: Promise<void> } {
    let attempted: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      attempted = resolve;
    });
    const loop = run(attempted).catch((err: unknown) => {
      this.options.logger.error({ err }, options.crashLog);
      this.fail(options.crashStatus(err), { retrying: false });
    });
    return { loop, started: Promise.race([first, this.pause(options.waitMs)]) };
  }

  /** The platform spoke (an answered poll, an event, a heartbeat acknowledged). */
  sawEvent(): void {
    this.lastEventAt = this.now();
  }

  /** The wait before retry number `attempt` (from 1), with {@link RECONNECT_JITTER}. */
  backoffMs(attempt: number): number {
    const { baseMs, maxMs } = this.options.backoff;
    return backoffMs(attempt, baseMs, maxMs, RECONNECT_JITTER);
  }

  report(): ConnectionReport {
    return { state: this.health(), lastEventAt: this.lastEventAt };
  }

  private health(): ConnectionReport["state"] {
    switch (this.current.state) {
      case "stopped":
        return "disabled";
      case "starting":
        return "reconnecting";
      case "error":
        return this.retrying ? "reconnecting" : "down";
      case "connected": {
        const limit = this.options.stalledAfterMs;
        const silentSince = this.lastEventAt;
        return limit !== undefined && silentSince !== null && this.now() - silentSince > limit
          ? "stalled"
          : "connected";
      }
    }
  }

  private change(next: PlatformStatus): void {
    const changed = next.state !== this.current.state || next.error !== this.current.error;
    this.current = next;
    if (changed) this.options.onStatusChange?.({ ...next });
  }
}
