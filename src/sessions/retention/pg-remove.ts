/** Shared by pruning and erasure on Postgres: is a session busy, and removing one whole. */
import { type Db, first } from "../pg-shared.js";
import { emptyPruneCounts, type PruneCounts } from "../retention-records.js";
import { TRANSCRIPT_TABLES } from "./transcript-tables.js";

/**
 * A session with work in progress (`$1` = key), a task it runs or started that has not ended included:
 * pruning and forgetting leave it alone.
 */
const SESSION_HELD = `SELECT
     EXISTS(SELECT 1 FROM turns WHERE session_key = $1 AND state = 'running')
  OR EXISTS(SELECT 1 FROM inbox WHERE session_key = $1 AND state IN ('pending', 'running'))
  OR EXISTS(SELECT 1 FROM outbox WHERE session_key = $1 AND state IN ('pending', 'sending'))
  OR EXISTS(SELECT 1 FROM approvals WHERE session_key = $1 AND state = 'pending')
  OR EXISTS(SELECT 1 FROM sessions WHERE key = $1 AND resume_pending)
  OR EXISTS(SELECT 1 FROM tasks WHERE (child_key = $1 OR parent_session_key = $1)
             AND state IN ('queued', 'running'))
  OR EXISTS(SELECT 1 FROM tool_calls c JOIN transcripts t ON t.session_id = c.session_id
             WHERE t.session_key = $1 AND c.state IN ('started', 'awaiting_approval')) AS held`;

export async function pgSessionHeld(db: Db, key: string): Promise<boolean> {
  return (await first<{ held: boolean }>(db, SESSION_HELD, [key]))?.held === true;
}

async function run(db: Db, sql: string, params: unknown[]): Promise<number> {
  return (await db.query(sql, params)).rowCount ?? 0;
}

/** Removes one session whole (its row, transcripts, journal, queues); model_usage stays. */
export async function pgRemoveSession(db: Db, key: string): Promise<PruneCounts> {
  const counts = emptyPruneCounts();
  const ids = (
    await db.query<{ session_id: string }>(
      "SELECT session_id FROM transcripts WHERE session_key = $1",
      [key],
    )
  ).rows.map((r) => r.session_id);
  const inTranscripts = "session_id = ANY($1::text[])";
  counts.messages = await run(db, `DELETE FROM messages WHERE ${inTranscripts}`, [ids]);
  for (const table of TRANSCRIPT_TABLES) {
    await run(db, `DELETE FROM ${table} WHERE ${inTranscripts}`, [ids]);
  }
  counts.transcripts = ids.length;
  await run(
    db,
    "DELETE FROM stream_messages WHERE turn_id IN (SELECT id FROM turns WHERE session_key = $1)",
    [key],
  );
  for (const table of ["media_steps", "idempotency_keys"]) {
    await run(
      db,
      `DELETE FROM ${table} WHERE inbox_id IN (SELECT id FROM inbox WHERE session_key = $1)`,
      [key],
    );
  }
  counts.inbox = await run(db, "DELETE FROM inbox WHERE session_key = $1", [key]);
  counts.outbox = await run(db, "DELETE FROM outbox WHERE session_key = $1", [key]);
  counts.approvals = await run(db, "DELETE FROM approvals WHERE session_key = $1", [key]);
  await run(db, "DELETE FROM turns WHERE session_key = $1", [key]);
  await run(db, "DELETE FROM sent_files WHERE session_key = $1", [key]);
  await run(db, "DELETE FROM transcripts WHERE session_key = $1", [key]);
  counts.sessions = await run(db, "DELETE FROM sessions WHERE key = $1", [key]);
  return counts;
}

export { run as pgRun };
