/**
 * Pure decisions about interrupted sessions at start: which continue by themselves (a synthetic
 * empty turn), which are stale (reset on their next message), which are suspended (cut off by
 * too many restarts in a row), and whether the restart-loop breaker holds everything back.
 * Also the system notes the agent sees on such turns.
 */
import type { ChatMessage } from "../agent/types.js";
import type { ChatAddress } from "../platforms/platform.js";
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
  /** Too old to continue by themselves: left resume-pending, reset on their next message. */
  stale: ResumeCandidate[];
  /** To be suspended now: their next message starts fresh, with a notice. */
  suspend: ResumeCandidate[];
  skipped: { key: string; reason: SkipReason }[];
  /** This boot counts toward the restart-loop breaker: record it in the boot history. */
  countsAsBoot: boolean;
  /** Too many boots with resumable sessions in a short time: resume and notify nothing. */
  breakerTripped: boolean;
}

/** Decides what happens to each resume-pending session at this start. */
export function planResume(input: ResumePlanInput): ResumePlan {
  const suspendAfter = input.suspendAfter ?? 3;
  const plan: ResumePlan = {
    resume: [],
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
  if (plan.resume.length === 0) return plan;
  plan.countsAsBoot = true;
  const windowMs = input.breakerWindowMs ?? 60_000;
  const boots =
    input.recentBoots.filter((at) => input.now - at <= windowMs && at <= input.now).length + 1;
  if (boots >= (input.breakerBoots ?? 3)) {
    plan.breakerTripped = true;
    plan.resume = [];
  }
  return plan;
}

/** Marked (or last updated) within the freshness window. */
export function isFresh(session: ResumeCandidate, now: number, freshnessMs: number): boolean {
  const markedAt = session.resumeMarkedAt ?? session.updatedAt ?? null;
  return markedAt !== null && now - markedAt <= freshnessMs;
}

const AUTO_CONTINUE_NOTE =
  "[System note: The gateway restarted before you could act on the last tool result(s) above. " +
  "Finish handling those results and say briefly what was done, then answer the user's new message below.]";

/**
 * The note for a turn whose history ends with tool results the agent never answered; null
 * for an empty history or one ending with an assistant or user message.
 */
export function autoContinueNote(history: readonly ChatMessage[]): string | null {
  return history.at(-1)?.role === "tool" ? AUTO_CONTINUE_NOTE : null;
}

/** The user's text with the auto-continue note in front when one applies; the text itself is kept intact after it. */
export function withAutoContinueNote(history: readonly ChatMessage[], userText: string): string {
  const note = autoContinueNote(history);
  return note === null ? userText : `${note}\n\n${userText}`;
}

const REASON_PHRASES: Record<ResumeReason, string> = {
  restart_timeout: "a gateway restart",
  shutdown_timeout: "a gateway shutdown",
  restart_interrupted: "an unexpected gateway stop",
  queued_during_stop: "a gateway restart",
};

/**
 * The note for a resumed session's turn. With an empty `userText` (the synthetic resume turn)
 * the agent is asked to tell the user the session is back; otherwise to answer the new message.
 */
export function resumeNote(reason: ResumeReason, userText: string): string {
  const guidance =
    userText.length === 0
      ? "Tell the user their session was restored and what state the interrupted work is in."
      : "Answer the user's new message below first.";
  const note =
    `[System note: Your previous turn was cut off by ${REASON_PHRASES[reason]}; the gateway is back. ` +
    "A restart or stop command in the history has already taken effect: do not run it again. " +
    `Do not repeat tool calls whose outcome is unknown without checking first. ${guidance}]`;
  return userText.length === 0 ? note : `${note}\n\n${userText}`;
}
