/**
 * A platform connection's state, held by each connecting adapter instead of re-implemented in
 * each: the status the gateway reports (`status()`), the change callback, the log line when the
 * platform becomes unavailable, the time of the last sign of life, the adapter's backoff, and its
 * stop signal with the waits that end on it. `report()` folds these into the connection health
 * of the contract (`ConnectionReport`).
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import type { ConnectionLease, ConnectionReport, PlatformStatus } from "../../contract/platform.js";
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

/** A connecting adapter whose connection one gateway at a time holds, when several share a store. */
export interface LeasedAdapterOptions<ProgressSettings>
  extends ConnectingAdapterOptions<ProgressSettings> {
  /**
   * Set when several gateways share the store: only the holder of this lease keeps the
   * platform's connection (every gateway sends); the others stand by and take over where it
   * left off. Without it, the adapter connects at once.
   */
  connection?: ConnectionLease;
}

/**
 * The status of a platform Keel serves itself (the API, the web chat) rather than connects to:
 * connected while started, with nothing that can fail in between.
 */
export function servedStatus(started: boolean): PlatformStatus {
  return { state: started ? "connected" : "stopped", error: null };
}

/**
 * Share of each reconnect wait drawn at random: gateways (and adapters) that lost the same
 * platform at once do not come back in step.
 */
export const RECONNECT_JITTER = 0.2;

/** The adapter a connection state reports for: its logger and its status callback. */
export type ConnectionOwner = Pick<ConnectingAdapterOptions<unknown>, "logger" | "onStatusChange">;

/** From the adapter's timing: the bounds of the backoff, and the longest start() waits. */
export type ConnectionTiming = Pick<AdapterTiming, "backoffBaseMs" | "backoffMaxMs"> &
  Partial<Pick<AdapterTiming, "startWaitMs">>;

/** What is the platform's own in its connection: when it is stalled, how its loop crashes. */
export interface ConnectionWatch {
  /**
   * Connected but silent for longer than this reads as `stalled`. Only for a platform that
   * speaks at a steady pace (a long poll's answers, heartbeats); omit where silence is normal.
   */
  stalledAfterMs?: number | undefined;
  /** The log line and the status when the loop {@link ConnectionState.start} runs throws. */
  crashLog?: string;
  crashStatus?(err: unknown): string;
  now?: () => number;
}

/** How {@link ConnectionState.launch} runs a loop. */
export interface LoopLaunch {
  /** The longest `started` waits for the loop's first attempt. */
  waitMs: number;
  crashLog: string;
  crashStatus(err: unknown): string;
}

/** What a session of {@link ConnectionState.keepConnected} reports as it goes. */
export interface SessionProgress {
  /** Connected (again): the status says so and the first attempt is over. */
  connected(): void;
  /** Work went through: the backoff after the next failure starts over. */
  healthy(): void;
}

/** An adapter's connection kept up by {@link ConnectionState.keepConnected}. */
export interface KeptConnection {
  /** Set when several gateways share the store: one holds the connection at a time. */
  lease: ConnectionLease | undefined;
  /** Said when this gateway takes the lease over. */
  takenLog: string;
  /** One connection, while `held` (it aborts when the hold is lost or the adapter stops). */
  session(held: AbortSignal, progress: SessionProgress): Promise<void>;
  /** After a failed session: true when it has failed the platform for good (no retry). */
  fatal(err: unknown): boolean;
  /** The status while retrying after `err`. */
  retryStatus(err: unknown): string;
}

export class ConnectionState {
  private current: PlatformStatus = { state: "stopped", error: null };
  /** False after an error the adapter does not retry (a rejected token): the platform is down. */
  private retrying = true;
  private lastEventAt: number | null = null;
  private readonly now: () => number;
  private readonly stopping = new AbortController();
  private running: Promise<void> | null = null;

  /**
   * `platform` is the name in its log lines ("telegram unavailable"); `timing` bounds the
   * backoff (first and largest wait between attempts).
   */
  constructor(
    private readonly platform: string,
    private readonly owner: ConnectionOwner,
    private readonly timing: ConnectionTiming,
    private readonly watch: ConnectionWatch = {},
  ) {
    this.now = watch.now ?? Date.now;
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
      this.owner.logger.error({ error }, `${this.platform} unavailable`);
    }
    this.retrying = options.retrying ?? true;
    this.change({ state: "error", error });
  }

  /**
   * Starts the adapter's connection loop once (not again while it runs, nor after the stop) and
   * resolves as {@link launch}'s `started` does, waiting at most the timing's `startWaitMs`. With
   * `unconfigured` (the setting that is missing, said as the status) nothing runs: the platform
   * fails, not retrying.
   */
  async start(
    run: (attempted: () => void) => Promise<void>,
    unconfigured: string | null = null,
  ): Promise<void> {
    if (this.running || this.stopped) return;
    if (unconfigured) {
      this.fail(unconfigured, { retrying: false });
      return;
    }
    this.set("starting");
    const { loop, started } = this.launch(run, {
      waitMs: this.timing.startWaitMs ?? 0,
      crashLog: this.watch.crashLog ?? `${this.platform} connection loop crashed`,
      crashStatus:
        this.watch.crashStatus ??
        ((err) => `${this.platform} stopped unexpectedly: ${(err as Error)?.message ?? err}`),
    });
    this.running = loop;
    await started;
  }

  /** The loop {@link start} runs, once started: what the adapter's stop waits for. */
  get loop(): Promise<void> | null {
    return this.running;
  }

  /**
   * Runs an adapter's connection loop in the background. `started` resolves after the loop's
   * first attempt (it calls `attempted`), after `waitMs`, or at the stop, whichever comes first.
   * A loop that throws is logged as `crashLog` and leaves the platform failed, not retrying, with
   * the status `crashStatus(err)`.
   */
  launch(
    run: (attempted: () => void) => Promise<void>,
    options: LoopLaunch,
  ): { loop: Promise<void>; started: Promise<void> } {
    let attempted: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      attempted = resolve;
    });
    const loop = run(attempted).catch((err: unknown) => {
      this.owner.logger.error({ err }, options.crashLog);
      this.fail(options.crashStatus(err), { retrying: false });
    });
    return { loop, started: Promise.race([first, this.pause(options.waitMs)]) };
  }

  /**
   * Waits until this gateway may hold the connection: at once without a lease (one gateway).
   * With one, while another gateway holds it this one stands by reported connected (its replies
   * still go out; `attempted` is told), and says `takenLog` once it takes over. The signal aborts
   * when the hold is lost or the adapter stops; null once stopped.
   */
  async holdLease(
    lease: ConnectionLease | undefined,
    takenLog: string,
    attempted: () => void,
  ): Promise<AbortSignal | null> {
    if (!lease) return this.stopSignal;
    const held = await lease.acquire(this.stopSignal, () => {
      this.set("connected");
      attempted();
    });
    if (!held) return null;
    this.owner.logger.info(takenLog);
    return AbortSignal.any([held, this.stopSignal]);
  }

  /**
   * An adapter's connection loop: holds the connection (see {@link holdLease}), runs a session
   * while it is held, and after a failure retries with backoff, unless the failure is fatal or
   * the hold was lost (then it waits for the lease again at once). Ends at the stop.
   */
  async keepConnected(kept: KeptConnection, attempted: () => void): Promise<void> {
    for (let failures = 0; !this.stopped; ) {
      const held = await this.holdLease(kept.lease, kept.takenLog, attempted);
      if (!held) return;
      const progress: SessionProgress = {
        connected: () => {
          this.set("connected");
          this.sawEvent();
          attempted();
        },
        healthy: () => {
          failures = 0;
        },
      };
      try {
        await kept.session(held, progress);
      } catch (err) {
        if (this.stopped) return;
        attempted();
        if (kept.fatal(err)) return;
        if (held.aborted) continue;
        failures += 1;
        this.fail(kept.retryStatus(err));
        await this.pause(this.backoffMs(failures));
      }
    }
  }

  /** The platform spoke (an answered poll, an event, a heartbeat acknowledged). */
  sawEvent(): void {
    this.lastEventAt = this.now();
  }

  /** The wait before retry number `attempt` (from 1), with {@link RECONNECT_JITTER}. */
  backoffMs(attempt: number): number {
    const { backoffBaseMs, backoffMaxMs } = this.timing;
    return backoffMs(attempt, backoffBaseMs, backoffMaxMs, RECONNECT_JITTER);
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
        const limit = this.watch.stalledAfterMs;
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
    if (changed) this.owner.onStatusChange?.({ ...next });
  }
}
