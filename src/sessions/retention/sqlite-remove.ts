/** Shared by pruning and erasure on SQLite: is a session busy, and removing one whole. */
import { emptyPruneCounts, type PruneCounts } from "../retention-records.js";
import type { SqliteContext } from "../sqlite-shared.js";
import { TRANSCRIPT_TABLES } from "./transcript-tables.js";

/**
 * A session with work in progress (bound `@k`), a task it runs or started that has not ended included:
 * pruning and forgetting leave it alone.
 */
export const SQLITE_SESSION_HELD = `SELECT
     EXISTS(SELECT 1 FROM turns WHERE session_key = @k AND state = 'running')
  OR EXISTS(SELECT 1 FROM inbox WHERE session_key = @k AND state IN ('pending', 'running'))
  OR EXISTS(SELECT 1 FROM outbox WHERE session_key = @k AND state IN ('pending', 'sending'))
  OR EXISTS(SELECT 1 FROM approvals WHERE session_key = @k AND state = 'pending')
  OR EXISTS(SELECT 1 FROM sessions WHERE key = @k AND resume_pending = 1)
  OR EXISTS(SELECT 1 FROM tasks WHERE (child_key = @k OR parent_session_key = @k)
             AND state IN ('queued', 'running'))
  OR EXISTS(SELECT 1 FROM tool_calls c JOIN transcripts t ON t.session_id = c.session_id
             WHERE t.session_key = @k AND c.state IN ('started', 'awaiting_approval'))`;

export function sqliteSessionHeld(s: SqliteContext, key: string): boolean {
  return (s.stmt(SQLITE_SESSION_HELD).pluck().get({ k: key }) as number) === 1;
}

/** Removes one session whole (its row, transcripts, journal, queues); model_usage stays. */
export function sqliteRemoveSession(s: SqliteContext, key: string): PruneCounts {
  const counts = emptyPruneCounts();
  const ids = s
    .stmt("SELECT session_id FROM transcripts WHERE session_key = ?")
    .pluck()
    .all(key) as string[];
  for (const id of ids) {
    counts.messages += s.stmt("DELETE FROM messages WHERE session_id = ?").run(id).changes;
    for (const table of TRANSCRIPT_TABLES) {
      s.stmt(`DELETE FROM ${table} WHERE session_id = ?`).run(id);
    }
    s.transcripts.forget(id);
  }
  counts.transcripts = ids.length;
  s.stmt(
    "DELETE FROM stream_messages WHERE turn_id IN (SELECT id FROM turns WHERE session_key = ?)",
  ).run(key);
  for (const table of ["media_steps", "idempotency_keys"]) {
    s.stmt(
      `DELETE FROM ${table} WHERE inbox_id IN (SELECT id FROM inbox WHERE session_key = ?)`,
    ).run(key);
  }
  counts.inbox = s.stmt("DELETE FROM inbox WHERE session_key = ?").run(key).changes;
  counts.outbox = s.stmt("DELETE FROM outbox WHERE session_key = ?").run(key).changes;
  counts.approvals = s.stmt("DELETE FROM approvals WHERE session_key = ?").run(key).changes;
  s.stmt("DELETE FROM turns WHERE session_key = ?").run(key);
  s.stmt("DELETE FROM sent_files WHERE session_key = ?").run(key);
  s.stmt("DELETE FROM transcripts WHERE session_key = ?").run(key);
  counts.sessions = s.stmt("DELETE FROM sessions WHERE key = ?").run(key).changes;
  markRewrite(s);
  return counts;
}

/**
 * A counter in `platform_state` that every pruning or erasing write moves, in its transaction:
 * another process holding parsed transcripts (the gateway, while `keel prune` runs) sees it move
 * and drops them. Appends by others need no mark: the cache reads what follows what it holds.
 */
export const REWRITE_MARK_KEY = "store:transcripts_rewritten";
// Its own text: statements are cached by text, and this one is read with pluck(), a mode that
// stays on the cached statement (getPlatformState's identical text would then get a bare value).
export const REWRITE_MARK_SQL = "SELECT value AS mark FROM platform_state WHERE key = ?";

export function markRewrite(s: SqliteContext): void {
  s.stmt(
    `INSERT INTO platform_state (key, value, updated_at) VALUES (?, '1', ?)
     ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT),
       updated_at = excluded.updated_at`,
  ).run(REWRITE_MARK_KEY, s.now());
}
