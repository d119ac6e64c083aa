/**
 * What to do with a job whose cursor has come due: fire the slot on time, or, when slots were
 * missed (the gateway was down, drained, or the previous run was still going), follow the job's
 * misfire policy: `once` runs the latest slot with a note saying how late it is, `skip` runs
 * nothing that is later than the grace, `all` runs every missed slot, one after another, at most
 * MAX_CATCH_UP of them.
 */
import type { MisfirePolicy } from "../sessions/store.js";
import { countSlotsIn, lastSlotsIn, nextSlotAfter, periodOf, type Timing } from "./timing.js";

/** `all` catches up at most this many missed slots (the latest ones). */
export const MAX_CATCH_UP = 10;
/** Slots counted for the note; beyond that the note says "at least". */
const COUNT_CAP = 1000;
/** A fire this late or less counts as on time: half the period, between 1 s and 15 min. */
const MIN_GRACE_MS = 1000;
const MAX_GRACE_MS = 15 * 60_000;

export interface DueJob {
  timing: Timing;
  misfire: MisfirePolicy;
  /** The cursor: the first slot not yet handled (due: at or before now). */
  nextFireAt: number;
}

export interface Fire {
  slot: number;
  lateMs: number;
  /** Slots before this one that will not run (collapsed by `once` or `skip`, too old for `all`). */
  dropped: number;
  /** A late run standing in for missed ones: the model is told how late it is. */
  catchUp: boolean;
}

export interface FirePlan {
  /** The slot to fire now, or null when the policy skips them all. */
  fire: Fire | null;
  /** Slots passed over without a run. */
  skipped: number;
  /** The new cursor; null when the job has no slot left (a one-shot). */
  nextFireAt: number | null;
}

export function graceMs(timing: Timing, around: number): number {
  const period = periodOf(timing, around);
  if (period === null) return MAX_GRACE_MS;
  return Math.min(MAX_GRACE_MS, Math.max(MIN_GRACE_MS, Math.floor(period / 2)));
}

/** Plans the due job at `now` (its cursor must be at or before `now`). */
export function planFire(job: DueJob, now: number): FirePlan {
  const { timing, nextFireAt: cursor } = job;
  const count = Math.max(1, countSlotsIn(timing, cursor, now, COUNT_CAP));
  const grace = graceMs(timing, cursor);
  const latest = lastSlotsIn(timing, cursor, now, 1)[0] ?? cursor;
  const afterNow = nextSlotAfter(timing, now, cursor);
  const fireAt = (slot: number, dropped: number, catchUp: boolean): Fire => ({
    slot,
    lateMs: Math.max(0, now - slot),
    dropped,
    catchUp,
  });

  if (count === 1 && now - latest <= grace) {
    return { fire: fireAt(latest, 0, false), skipped: 0, nextFireAt: afterNow };
  }
  switch (job.misfire) {
    case "once":
      return { fire: fireAt(latest, count - 1, true), skipped: count - 1, nextFireAt: afterNow };
    case "skip": {
      // The latest slot is still on time: it runs as usual, the older ones do not.
      if (now - latest <= grace) {
        const fire = fireAt(latest, count - 1, false);
        return { fire, skipped: count - 1, nextFireAt: afterNow };
      }
      return { fire: null, skipped: count, nextFireAt: afterNow };
    }
    case "all": {
      const slots = lastSlotsIn(timing, cursor, now, Math.min(count, MAX_CATCH_UP));
      const first = slots[0] ?? latest;
      const dropped = count - slots.length;
      return {
        fire: fireAt(first, dropped, true),
        skipped: dropped,
        nextFireAt: nextSlotAfter(timing, first, cursor),
      };
    }
  }
}
