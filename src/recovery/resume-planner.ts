/**
 * Pure decisions about interrupted sessions at start: which continue by themselves (a synthetic
 * empty turn), which are stale (reset on their next message), which are suspended (cut off by
 * too many restarts in a row), and whether the restart-loop breaker holds them back until the
 * gateway has stayed up for a while (deferred, never dropped).
 * The notes the agent sees on such turns live with the runner, which builds the model input
 * (src/runner/history.ts).
 */
import type { ChatAddress } from "../contract/platform.js";
import type { ResumeReason } from "../sessions/store.js";

/** Reasons that resume by themselves after a restart. */
export const AUTO_RESUME_REASONS: ReadonlySet<ResumeReason> = new Set([
  "restart_timeout",
  "shutdown_timeout",
  "restart_interrupted",
]);

export interface ResumeCandidate {
  key: string;
  resumeReason: ResumeReason | null;
  /** When the session was marked resume-pending (epoch ms); falls back to `updatedAt`. */
  resumeMarkedAt: number | null;
  updatedAt?: number;
  /** Restarts in a row that cut off this session's turn. */
  interruptCount: number;
  suspended: boolean;
  origin: ChatAddress | null;
}

export interface ResumePlanInput {
  sessions: ResumeCandidate[];
  now: number;
  /** `agent.auto_resume_freshness` in milliseconds. */
  freshnessMs: number;
  /** Earlier boots that had resumable sessions (epoch ms), from the boot history. */
  recentBoots: number[];
  /** Interrupted restarts in a row that suspend a session. Default 3. */
  suspendAfter?: number;
  /** Boots with resumable sessions within `breakerWindowMs` that trip the breaker. Default 3. */
  breakerBoots?: number;
  /** Default 60 s. */
  breakerWindowMs?: number;
}

export type SkipReason = "already_suspended" | "reason_not_resumable" | "no_origin";

export interface ResumePlan {
  /** Sessions that get a synthetic resume turn now (empty when the breaker tripped). */
  resume: ResumeCandidate[];
  /**
   * Held back by the breaker: they stay resume-pending and resume once the gateway has stayed
   * up for the breaker window (or at a later boot). Empty unless the breaker tripped.
   */
  held: ResumeCandidate[];
  /** Too old to continue by themselves: left resume-pending, reset on their next message. */
  stale: ResumeCandidate[];
  /** To be suspended now: their next message starts fresh, with a notice. */
  suspend: ResumeCandidate[];
  skipped: { key: string; reason: SkipReason }[];
  /** This boot counts toward the restart-loop breaker: record it in the boot history. */
  countsAsBoot: boolean;
  /** Too many boots with resumable sessions in a short time: hold back instead of resuming. */
  breakerTripped: boolean;
}

/** Decides what happens to each resume-pending session at this start. */
export function planResume(input: ResumePlanInput): ResumePlan {
  const suspendAfter = input.suspendAfter ?? 3;
  const plan: ResumePlan = {
    resume: [],
    held: [],
    stale: [],
    suspend: [],
    skipped: [],
    countsAsBoot: false,
    breakerTripped: false,
  };
  for (const session of input.sessions) {
    if (session.suspended) {
      plan.skipped.push({ key: session.key, reason: "already_suspended" });
    } else if (session.interruptCount >= suspendAfter) {
      plan.suspend.push(session);
    } else if (session.resumeReason === null || !AUTO_RESUME_REASONS.has(session.resumeReason)) {
      plan.skipped.push({ key: session.key, reason: "reason_not_resumable" });
    } else if (session.origin === null) {
      plan.skipped.push({ key: session.key, reason: "no_origin" });
    } else if (!isFresh(session, input.now, input.freshnessMs)) {
      plan.stale.push(session);
    } else {
      plan.resume.push(session);
    }
  }
  // A crash loop cuts off every running turn, so it says nothing about one conversation: while
  // the breaker holds resumes back, the sessions due for suspension that could resume are held
  // with the rest, and suspended at a later boot only if their resume is cut off again.
  const holdable = plan.suspend.filter((s) => canResume(s, input.now, input.freshnessMs));
  if (plan.resume.length === 0 && holdable.length === 0) return plan;
  const windowMs = input.breakerWindowMs ?? 60_000;
  const boots =
    input.recentBoots.filter((at) => input.now - at <= windowMs && at <= input.now).length + 1;
  if (boots >= (input.breakerBoots ?? 3)) {
    plan.breakerTripped = true;
    plan.countsAsBoot = true;
    plan.held = [...plan.resume, ...holdable];
    plan.resume = [];
    plan.suspend = plan.suspend.filter((s) => !holdable.includes(s));
  } else {
    plan.countsAsBoot = plan.resume.length > 0;
  }
  return plan;
}

/** Would resume by itself if it were not due for suspension. */
function canResume(session: ResumeCandidate, now: number, freshnessMs: number): boolean {
  return (
    session.origin !== null &&
    session.resumeReason !== null &&
    AUTO_RESUME_REASONS.has(session.resumeReason) &&
    isFresh(session, now, freshnessMs)
  );
}

/**
 * Marked (or last updated) less than the freshness window ago. A window of 0 means "never
 * continue by itself", even for a session marked in this very millisecond or, after the clock
 * stepped back (or on another gateway's clock), in the future.
 */
export function isFresh(session: ResumeCandidate, now: number, freshnessMs: number): boolean {
  const markedAt = session.resumeMarkedAt ?? session.updatedAt ?? null;
  return freshnessMs > 0 && markedAt !== null && now - markedAt < freshnessMs;
}
