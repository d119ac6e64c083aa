/**
 * At start: decides which interrupted sessions continue by themselves (resume planner), applies
 * suspensions and the restart-loop breaker, and hands the resumes to the runner.
 */
import type { Logger } from "pino";
import type { Runner } from "../runner/runner.js";
import type { Store } from "../sessions/store.js";
import { readBootHistory, recordBoot } from "./boot-history.js";
import { hasWorkToContinue } from "./recovery.js";
import { planResume } from "./resume-planner.js";

export interface ResumeOptions {
  store: Store;
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
  breakerTripped: boolean;
}

export async function resumeInterruptedSessions(options: ResumeOptions): Promise<ResumeOutcome> {
  const { store, runner, home, now, logger } = options;
  const pending = await store.listResumePending();
  if (pending.length === 0) return { resumed: [], breakerTripped: false };
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
  for (const session of plan.suspend) {
    await store.setSuspended(session.key, true);
    await store.clearResumePending(session.key);
  }
  if (plan.breakerTripped) {
    logger.error(
      { sessions: pending.map((s) => s.key) },
      "restart loop detected: not resuming sessions this boot",
    );
    return { resumed: [], breakerTripped: true };
  }
  const resumed: string[] = [];
  const byKey = new Map(pending.map((s) => [s.key, s]));
  for (const candidate of plan.resume) {
    const session = byKey.get(candidate.key)!;
    if (!(await hasWorkToContinue(store, session))) {
      // The record shows the turn had already answered: nothing to continue, no duplicate reply.
      await store.clearResumePending(session.key);
      continue;
    }
    runner.resume(session);
    resumed.push(session.key);
  }
  if (resumed.length > 0) logger.info({ sessions: resumed }, "resuming interrupted sessions");
  return { resumed, breakerTripped: false };
}
