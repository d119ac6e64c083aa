/**
 * At start: decides which interrupted sessions continue by themselves (resume planner), applies
 * suspensions and the restart-loop breaker, and hands the resumes to the runner. When the breaker
 * trips, the sessions are held back (still resume-pending, each chat told once) and resumed by
 * `resumeHeldBack` once the gateway has stayed up for the breaker window.
 */
import type { Logger } from "pino";
import { contentText } from "../agent/content.js";
import { cutOffRequest } from "../runner/history.js";
import { droppedRequestNotice, heldBackNotice } from "../runner/lifecycle-texts.js";
import type { Runner } from "../runner/runner.js";
import type { OutboxStore, SessionRecord, SessionStore, TurnStore } from "../sessions/store.js";
import { readBootHistory, recordBoot } from "./boot-history.js";
import { sessionsWithWorkToContinue } from "./recovery.js";
import { planResume } from "./resume-planner.js";

export interface ResumeOptions {
  store: SessionStore & OutboxStore & TurnStore;
  runner: Runner;
  home: string;
  now: number;
  freshnessMs: number;
  breakerBoots: number;
  breakerWindowMs: number;
  logger: Logger;
}

export interface ResumeOutcome {
  resumed: string[];
  /** Held back by the breaker: resume them once the gateway has stayed up for the window. */
  held: string[];
  /** Notices queued in the outbox (held-back and dropped requests). */
  notices: number;
  breakerTripped: boolean;
}

export async function resumeInterruptedSessions(options: ResumeOptions): Promise<ResumeOutcome> {
  const { store, runner, home, now, logger } = options;
  const outcome: ResumeOutcome = { resumed: [], held: [], notices: 0, breakerTripped: false };
  const pending = await store.listResumePending();
  if (pending.length === 0) return outcome;
  const recentBoots =
    options.breakerWindowMs > 0 ? await readBootHistory(home, now, options.breakerWindowMs) : [];
  const plan = planResume({
    sessions: pending,
    now,
    freshnessMs: options.freshnessMs,
    recentBoots,
    breakerBoots: options.breakerBoots,
    breakerWindowMs: options.breakerWindowMs,
  });
  if (plan.countsAsBoot && options.breakerWindowMs > 0)
    await recordBoot(home, now, options.breakerWindowMs);
  const byKey = new Map(pending.map((s) => [s.key, s]));
  for (const candidate of plan.suspend) {
    const session = byKey.get(candidate.key)!;
    // The notice first: a crash before the suspension suspends again at the next start, and the
    // store gives the notice only once.
    if (await notify(store, session, "dropped", droppedRequestNotice)) outcome.notices += 1;
    await store.setSuspended(session.key, true);
    await store.clearResumePending(session.key);
  }
  if (plan.breakerTripped) {
    outcome.breakerTripped = true;
    const windowSeconds = Math.round(options.breakerWindowMs / 1000);
    const held = plan.held.map((candidate) => byKey.get(candidate.key)!);
    const withWork = await sessionsWithWorkToContinue(store, held);
    for (const session of held) {
      if (!withWork.has(session.key)) {
        await store.clearResumePending(session.key);
        continue;
      }
      const text = (request: string | null) => heldBackNotice(request, windowSeconds);
      if (await notify(store, session, "held_back", text)) outcome.notices += 1;
      outcome.held.push(session.key);
    }
    logger.error(
      { sessions: outcome.held, windowSeconds },
      "restart loop detected: holding back resumes until the gateway has stayed up for the breaker window",
    );
    return outcome;
  }
  // One read, before the first resume starts: read one session at a time, the checks queued
  // behind the resumed turns on the store's connections.
  const resuming = plan.resume.map((candidate) => byKey.get(candidate.key)!);
  const withWork = await sessionsWithWorkToContinue(store, resuming);
  for (const session of resuming) {
    if (!withWork.has(session.key)) {
      // The record shows the turn had already answered: nothing to continue, no duplicate reply.
      await store.clearResumePending(session.key);
      continue;
    }
    runner.resume(session);
    outcome.resumed.push(session.key);
  }
  if (outcome.resumed.length > 0)
    logger.info({ sessions: outcome.resumed }, "resuming interrupted sessions");
  return outcome;
}

/**
 * Resumes the sessions the breaker held back that still wait (a newer turn, `/retry` or `/new`
 * may have dealt with some meanwhile); returns their keys.
 */
export async function resumeHeldBack(options: {
  store: SessionStore & OutboxStore & TurnStore;
  runner: Runner;
  keys: readonly string[];
  logger: Logger;
}): Promise<string[]> {
  const resumed: string[] = [];
  for (const key of options.keys) {
    const session = await options.store.getSession(key);
    if (!session?.resumePending || session.suspended) continue;
    options.runner.resume(session);
    resumed.push(key);
  }
  if (resumed.length > 0) options.logger.info({ sessions: resumed }, "resuming held-back sessions");
  return resumed;
}

/** Queues a request notice to the session's origin once; true when it was queued now. */
async function notify(
  store: SessionStore & OutboxStore & TurnStore,
  session: SessionRecord,
  notice: "held_back" | "dropped",
  text: (request: string | null) => string,
): Promise<boolean> {
  if (!session.origin) return false;
  const request = await lastRequest(store, session.sessionId);
  const queued = await store.enqueueRequestNotice({
    sessionKey: session.key,
    notice,
    address: session.origin,
    text: text(request),
  });
  return queued !== null;
}

/**
 * What was cut off: the user messages since the transcript's last reply (several when more came
 * in meanwhile, all of which a dropped session loses), as one text.
 */
async function lastRequest(
  store: SessionStore & OutboxStore & TurnStore,
  sessionId: string,
): Promise<string | null> {
  const transcript = await store.loadTranscript(sessionId);
  const request = cutOffRequest(transcript.map((m) => m.message));
  return request === null ? null : contentText(request);
}
