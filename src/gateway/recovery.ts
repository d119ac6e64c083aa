/**
 * Start-up recovery: reads what the previous process left behind and turns it into resume
 * marks. Turns still `running` in the store were cut off (crash, SIGKILL, power loss, or a stop
 * that interrupted them); without a clean-shutdown marker, every session active in the last
 * 120 s is presumed cut off too (lifecycle.md) — unless its transcript shows nothing left to do.
 */
import type { CrashPoint } from "../lib/crash-point.js";
import type { SessionRecord, Store } from "../sessions/store.js";

export const RECENT_ACTIVITY_MS = 120_000;

export interface RecoveryReport {
  interruptedTurns: number;
  markedSessions: string[];
}

/** Turns the previous process's cut-off work into resume marks; safe to run again after a crash. */
export async function recoverInterruptedWork(
  store: Store,
  options: { cleanShutdown: boolean; now: number; crashPoint?: CrashPoint },
): Promise<RecoveryReport> {
  const running = await store.listRunningTurns();
  const keys = new Set(running.map((turn) => turn.sessionKey));
  if (!options.cleanShutdown) {
    for (const session of await store.listSessionsActiveSince(options.now - RECENT_ACTIVITY_MS)) {
      // A session whose last turn answered was not cut off: marking it would count a restart
      // against it, and three such counts suspend a session that never lost anything.
      if (await hasWorkToContinue(store, session)) keys.add(session.key);
    }
  }
  const alreadyPending = new Set((await store.listResumePending()).map((s) => s.key));
  const toMark = [...keys].filter((k) => !alreadyPending.has(k));
  // Marks first, turns closed after: a crash in between leaves the turns running, so the next
  // start finds them again (their sessions already marked, not counted twice). The other order
  // would leave closed turns whose sessions nobody resumes.
  await store.markResumePending(toMark, "restart_interrupted");
  options.crashPoint?.("mid_recovery");
  for (const turn of running) {
    await store.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });
  }
  return { interruptedTurns: running.length, markedSessions: toMark };
}

/**
 * False when the session's transcript is empty or ends with a final assistant answer (no tool
 * calls): the record shows its last turn finished, so there is nothing to continue.
 */
export async function hasWorkToContinue(store: Store, session: SessionRecord): Promise<boolean> {
  const transcript = await store.loadTranscript(session.sessionId);
  const last = transcript.at(-1)?.message;
  if (!last) return false;
  return !(last.role === "assistant" && !last.tool_calls?.length);
}
