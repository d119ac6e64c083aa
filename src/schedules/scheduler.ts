/**
 * The scheduler loop: wakes at the next due slot (and at least every `rescanMs`, which is how
 * jobs added or changed by `keel schedule` in another process are seen), turns due slots into
 * inbox rows through the runner's intake, and counts each job's runs so that repeated failures
 * pause it.
 *
 * Exactly once per slot: the inbox row of a fire and the job's advanced cursor are committed in
 * one transaction (ScheduleStore & InboxStore.acceptInbound with an advance), and the inbox is unique per (platform
 * `schedule`, job name, slot). A job fires again only once its previous fire has left the inbox
 * (done or cancelled): a long run, a drain or a stop never piles up fires; the slots missed
 * meanwhile go through the misfire policy.
 */
import type { Logger } from "pino";
import type { ChatAddress, InboundMessage } from "../contract/platform.js";
import { SCHEDULE_PLATFORM } from "../runner/scheduled-input.js";
import {
  type InboxStore,
  type ScheduleAdvance,
  ScheduleChangedError,
  type ScheduleJob,
  type ScheduleStore,
} from "../sessions/store.js";
import { fireMessage, jobNameOfSession } from "./fire-message.js";
import { planFire } from "./misfire.js";

/** Timers the loop arms; tests drive their own. */
export interface SchedulerTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const NODE_TIMERS: SchedulerTimers = {
  set: (fn, ms) => setTimeout(fn, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface SchedulerOptions {
  store: ScheduleStore & InboxStore;
  /** The runner's intake: commits the fire together with the advance, then dispatches it. */
  intake(message: InboundMessage, advance: ScheduleAdvance): Promise<unknown>;
  /** Queues a notice to a chat (a job paused after failures). */
  notify(address: ChatAddress, text: string): Promise<void>;
  logger: Logger;
  now: () => number;
  timers?: SchedulerTimers;
  /** Longest sleep between two looks at the jobs (default 5 s). */
  rescanMs?: number;
  /** Failed runs in a row that pause a job (default 3). */
  pauseAfterFailures?: number;
  /**
   * True while the job's last run waits for an answer (a budget pause): its due slots wait too,
   * and once it is answered the misfire policy decides them, as slots missed while down.
   */
  held?(jobName: string): Promise<boolean>;
}

export const DEFAULT_RESCAN_MS = 5000;
export const PAUSE_AFTER_FAILURES = 3;

export class Scheduler {
  private readonly timers: SchedulerTimers;
  private timer: unknown = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = true;

  constructor(private readonly options: SchedulerOptions) {
    this.timers = options.timers ?? NODE_TIMERS;
  }

  start(): void {
    this.stopped = false;
    this.kick();
  }

  /** Looks at the jobs now (after a change, or when a job's run ended). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.disarm();
    this.running = this.pass()
      .catch((err: unknown) => this.options.logger.error({ err }, "scheduler pass failed"))
      .then((wakeAt) => {
        this.running = null;
        if (this.again) {
          this.again = false;
          this.kick();
        } else this.arm(wakeAt ?? this.options.now() + this.rescanMs());
      });
  }

  /** Stops the loop; resolves once no pass is under way (nothing is fired after this). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.disarm();
    await this.running;
  }

  /** A turn ended: counts it for its job, if it was one, and looks again. */
  async onTurnEnd(event: { sessionKey: string; stopReason: string }): Promise<void> {
    const name = jobNameOfSession(event.sessionKey);
    if (name === null || event.stopReason === "aborted" || this.stopped) return;
    const ok = event.stopReason !== "error";
    const pauseAfter = this.options.pauseAfterFailures ?? PAUSE_AFTER_FAILURES;
    const outcome = await this.options.store.recordScheduleRun(name, ok, pauseAfter);
    if (outcome?.pausedNow) {
      this.options.logger.warn({ job: name, failures: outcome.job.failures }, "schedule paused");
      if (outcome.job.chat) {
        await this.options.notify(
          outcome.job.chat,
          `⏰ ${name} is paused after ${outcome.job.failures} failed runs in a row. ` +
            `Resume it with /schedules resume, or keel schedule resume ${name}.`,
        );
      }
    }
    this.kick();
  }

  private rescanMs(): number {
    return this.options.rescanMs ?? DEFAULT_RESCAN_MS;
  }

  private arm(wakeAt: number): void {
    if (this.stopped) return;
    const now = this.options.now();
    const delay = Math.min(this.rescanMs(), Math.max(wakeAt - now, 10));
    this.timer = this.timers.set(() => {
      this.timer = null;
      this.kick();
    }, delay);
  }

  private disarm(): void {
    if (this.timer !== null) this.timers.clear(this.timer);
    this.timer = null;
  }

  /** Fires what is due; returns when to look next. */
  private async pass(): Promise<number> {
    const { store } = this.options;
    let wakeAt = this.options.now() + this.rescanMs();
    for (const job of await store.listScheduleJobs()) {
      if (this.stopped) break;
      if (job.paused || job.nextFireAt === null) continue;
      const now = this.options.now();
      if (job.nextFireAt > now) {
        wakeAt = Math.min(wakeAt, job.nextFireAt);
        continue;
      }
      // The previous fire still waits or runs: this one waits for it (its end kicks the loop).
      if (await store.hasOpenInbox(SCHEDULE_PLATFORM, job.name)) continue;
      if (await this.options.held?.(job.name)) continue;
      const next = await this.fire(job, now);
      if (next !== null) wakeAt = Math.min(wakeAt, next);
    }
    return wakeAt;
  }

  /** Fires (or skips) the due job; returns its new cursor. */
  private async fire(job: ScheduleJob, now: number): Promise<number | null> {
    const cursor = job.nextFireAt!;
    const plan = planFire({ timing: job, misfire: job.misfire, nextFireAt: cursor }, now);
    const log = { job: job.name, skipped: plan.skipped };
    try {
      if (!plan.fire) {
        await this.options.store.skipScheduleSlots(job.id, cursor, plan.nextFireAt);
        this.options.logger.info(log, "schedule: missed slots skipped (misfire skip)");
        return plan.nextFireAt;
      }
      const { slot, lateMs } = plan.fire;
      await this.options.intake(fireMessage(job, plan.fire), {
        jobId: job.id,
        expectedNextFireAt: cursor,
        firedSlot: slot,
        lateMs,
        nextFireAt: plan.nextFireAt,
      });
      this.options.logger.info(
        { ...log, slot: new Date(slot).toISOString(), lateMs },
        "schedule fired",
      );
      return plan.nextFireAt;
    } catch (err) {
      // Changed by `keel schedule` (or deleted) since it was read: the next pass sees the change.
      if (err instanceof ScheduleChangedError) return now;
      throw err;
    }
  }
}
