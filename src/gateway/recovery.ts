/**
 * Start-up recovery: reads what the previous process left behind and turns it into resume
 * marks. Turns still `running` in the store were cut off (crash, SIGKILL, power loss, or a stop
 * that interrupted them); without a clean-shutdown marker, every session active in the last
 * 120 s is presumed cut off too (lifecycle.md).
 */
import type { ResumeReason, Store } from "../sessions/store.js";

export const RECENT_ACTIVITY_MS = 120_000;

export interface RecoveryReport {
  interruptedTurns: number;
  markedSessions: string[];
}

export async function recoverInterruptedWork(
  store: Store,
  options: { cleanShutdown: boolean; now: number },
): Promise<RecoveryReport> {
  const running = await store.listRunningTurns();
  const cutOff = [...new Set(running.map((turn) => turn.sessionKey))];
  // Marked before the turns are closed: a crash in between leaves them `running` for next time.
  await markCutOff(store, cutOff, "restart_interrupted");
  for (const turn of running) {
    await store.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });
  }
  const recent: string[] = [];
  if (!options.cleanShutdown) {
    // listSessionsActiveSince leaves out sessions already resume-pending.
    for (const session of await store.listSessionsActiveSince(options.now - RECENT_ACTIVITY_MS)) {
      if (!cutOff.includes(session.key)) recent.push(session.key);
    }
    await store.markResumePending(recent, "restart_interrupted");
  }
  return { interruptedTurns: running.length, markedSessions: [...cutOff, ...recent] };
}

/**
 * Marks sessions whose running turn was cut off, so that each cut-off counts toward suspension
 * (three in a row suspend a session). The store keeps the count of a session that is already
 * resume-pending (a resumed turn cut off again), so such a mark is cleared and set anew. A
 * crash in between loses nothing: the turn is still `running`, and the next start marks it.
 */
export async function markCutOff(
  store: Store,
  keys: string[],
  reason: ResumeReason,
): Promise<void> {
  if (keys.length === 0) return;
  const pending = new Set((await store.listResumePending()).map((s) => s.key));
  for (const key of keys) if (pending.has(key)) await store.clearResumePending(key);
  await store.markResumePending(keys, reason);
}
