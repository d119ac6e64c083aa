/**
 * Start-up recovery: reads what the previous process left behind and turns it into resume
 * marks. Turns still `running` in the store were cut off (crash, SIGKILL, power loss, or a stop
 * that interrupted them); without a clean-shutdown marker, every session active in the last
 * 120 s is presumed cut off too (docs/architecture.md, recovery) — unless its transcript shows
 * nothing left to do.
 */
import type { ChatMessage } from "../agent/types.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type {
  ClusterStore,
  LeaseToken,
  ResumeReason,
  SessionRecord,
  SessionStore,
  TurnRecord,
  TurnStore,
} from "../sessions/store.js";

export const RECENT_ACTIVITY_MS = 120_000;

export interface RecoveryReport {
  interruptedTurns: number;
  markedSessions: string[];
}

/** Turns the previous process's cut-off work into resume marks; safe to run again after a crash. */
export async function recoverInterruptedWork(
  store: SessionStore & TurnStore & ClusterStore,
  options: {
    cleanShutdown: boolean;
    now: number;
    crashPoint?: CrashPoint;
    /**
     * Set when several gateways share the store: only sessions this instance can take the lease
     * of are recovered (a live instance's running turn is its own), under that lease.
     */
    leases?: { owner: string; ttlMs: number };
  },
): Promise<RecoveryReport> {
  const held = new Map<string, LeaseToken>();
  try {
    return await recover(store, options, held);
  } finally {
    await store.releaseSessionLeases([...held.values()]);
  }
}

async function recover(
  store: SessionStore & TurnStore & ClusterStore,
  options: Parameters<typeof recoverInterruptedWork>[1],
  held: Map<string, LeaseToken>,
): Promise<RecoveryReport> {
  /** True when this instance may recover the session (always, with an unshared store). */
  const mine = async (sessionKey: string): Promise<boolean> => {
    if (!options.leases || held.has(sessionKey)) return true;
    const lease = await store.claimSessionLease(
      sessionKey,
      options.leases.owner,
      options.leases.ttlMs,
    );
    if (lease) held.set(sessionKey, lease);
    return lease !== null;
  };
  const found = await store.listRunningTurns();
  // The cut-off sessions' leases, each once, all in one transaction: one at a time (a lease
  // claimed, a turn closed and a lease released each in turn), 1,000 cut-off turns kept a
  // gateway on Postgres from being ready for 31 s.
  const foundKeys = [...new Set(found.map((turn) => turn.sessionKey))];
  if (options.leases) {
    const { owner, ttlMs } = options.leases;
    for (const [key, lease] of await store.claimSessionLeases(foundKeys, owner, ttlMs))
      held.set(key, lease);
  }
  const mineKeys = options.leases ? new Set(held.keys()) : new Set(foundKeys);
  const candidates: TurnRecord[] = found.filter((turn) => mineKeys.has(turn.sessionKey));
  // Under the leases now held, re-read: another instance may have recovered one meanwhile.
  const still = options.leases ? new Set((await store.listRunningTurns()).map((t) => t.id)) : null;
  const running = still ? candidates.filter((t) => still.has(t.id)) : candidates;
  const cutOff = [...new Set(running.map((turn) => turn.sessionKey))];
  const startedAt = new Map(running.map((turn) => [turn.sessionKey, turn.startedAt]));
  // Marks first, turns closed after: a crash in between leaves the turns running, so the next
  // start finds them again. The other order would leave closed turns nobody resumes.
  await markCutOff(store, cutOff, "restart_interrupted", startedAt);
  options.crashPoint?.("mid_recovery");
  // All in one transaction, each under its session's lease.
  await store.interruptTurns(
    running.map((turn) => {
      const lease = held.get(turn.sessionKey);
      return { turnId: turn.id, ...(lease && { lease }) };
    }),
  );
  const recent: string[] = [];
  if (!options.cleanShutdown) {
    const cutOffKeys = new Set(cutOff);
    // listSessionsActiveSince leaves out sessions already resume-pending.
    const active = (await store.listSessionsActiveSince(options.now - RECENT_ACTIVITY_MS)).filter(
      (session) => !cutOffKeys.has(session.key),
    );
    // A session whose last turn answered was not cut off: marking it would count a restart
    // against it, and three such counts suspend a session that never lost anything.
    const withWork = await sessionsWithWorkToContinue(store, active);
    for (const session of active) {
      if (withWork.has(session.key) && (await mine(session.key))) recent.push(session.key);
    }
    await store.markResumePending(recent, "restart_interrupted");
  }
  return { interruptedTurns: running.length, markedSessions: [...cutOff, ...recent] };
}

/**
 * Marks sessions whose running turn was cut off, so that each cut-off counts toward suspension
 * (three in a row suspend a session). A session already resume-pending whose mark is older than
 * the cut-off turn (a resumed turn cut off again) is cleared and marked anew, which counts; one
 * marked after that turn started (a recovery interrupted by a crash, run again) is not counted
 * twice. `turnStartedAt` gives each key's cut-off turn start (epoch ms).
 */
export async function markCutOff(
  store: SessionStore,
  keys: string[],
  reason: ResumeReason,
  turnStartedAt: ReadonlyMap<string, number> = new Map(),
): Promise<void> {
  if (keys.length === 0) return;
  const pending = new Map((await store.listResumePending()).map((s) => [s.key, s]));
  const toMark: string[] = [];
  for (const key of keys) {
    const session = pending.get(key);
    const startedAt = turnStartedAt.get(key);
    if (session && startedAt !== undefined && (session.resumeMarkedAt ?? 0) >= startedAt) continue;
    if (session) await store.clearResumePending(key);
    toMark.push(key);
  }
  await store.markResumePending(toMark, reason);
}

/**
 * The keys of the sessions that have work to continue, read together (one store read, however
 * many: at start-up there may be a thousand). A session has none when its transcript is empty or
 * ends with a final assistant answer (no tool calls): the record shows its last turn finished.
 */
export async function sessionsWithWorkToContinue(
  store: TurnStore,
  sessions: readonly SessionRecord[],
): Promise<Set<string>> {
  if (sessions.length === 0) return new Set();
  const last = await store.loadLastMessages(sessions.map((s) => s.sessionId));
  return new Set(
    sessions.filter((s) => endsWithWorkToContinue(last.get(s.sessionId))).map((s) => s.key),
  );
}

function endsWithWorkToContinue(last: ChatMessage | undefined): boolean {
  if (!last) return false;
  return !(last.role === "assistant" && !last.tool_calls?.length);
}
