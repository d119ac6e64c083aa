/**
 * RetentionStore (retention) on Postgres; what each method promises is in roles.ts. Every write is
 * one transaction on one transcript, one session or one batch of loose rows. A dry run does the
 * same work and rolls it back.
 */
import { type Db, first, type PgContext } from "../pg-shared.js";
import type {
  PruneCounts,
  RetentionCutoffs,
  RetentionHolds,
  StoreCounts,
} from "../retention-records.js";
import { emptyPruneCounts, PRUNED_TOOL_OUTPUT } from "../retention-records.js";
import type { RetentionStore } from "../roles.js";
import { DryRunRollback, settleDryRun } from "./dry-run.js";
import { pgForgetPerson, pgPersonData } from "./pg-person.js";
import { pgRemoveSession, pgSessionHeld, pgRun as run } from "./pg-remove.js";
import { EMPTIED_TRANSCRIPT_TABLES } from "./transcript-tables.js";

async function pruneMessages(db: Db, id: string, before: number, counts: PruneCounts) {
  // The history kept starts at a user message, so no tool result is left without its call.
  const boundary = (
    await first<{ seq: number | null }>(
      db,
      `SELECT MIN(seq) AS seq FROM messages
        WHERE session_id = $1 AND role = 'user' AND created_at >= $2`,
      [id, before],
    )
  )?.seq;
  const cut = boundary ?? Number.MAX_SAFE_INTEGER;
  counts.messages += await run(db, "DELETE FROM messages WHERE session_id = $1 AND seq < $2", [
    id,
    cut,
  ]);
  if (counts.messages === 0) return;
  await run(db, "DELETE FROM compactions WHERE session_id = $1 AND through_seq < $2", [id, cut]);
  await run(
    db,
    `DELETE FROM tool_calls WHERE session_id = $1 AND state NOT IN ('started', 'awaiting_approval')
       AND turn_id NOT IN (SELECT turn_id FROM messages WHERE session_id = $1 AND turn_id IS NOT NULL)`,
    [id],
  );
  const current = await first(db, "SELECT 1 FROM sessions WHERE session_id = $1", [id]);
  if ((boundary === null || boundary === undefined) && !current) {
    for (const table of EMPTIED_TRANSCRIPT_TABLES) {
      await run(db, `DELETE FROM ${table} WHERE session_id = $1`, [id]);
    }
    counts.transcripts += 1;
  }
}

async function pruneToolOutput(db: Db, id: string, before: number, counts: PruneCounts) {
  counts.toolOutputs += await run(
    db,
    `UPDATE messages SET body = jsonb_set(body::jsonb, '{content}', to_jsonb($3::text))::text
      WHERE session_id = $1 AND role = 'tool' AND created_at < $2
        AND (body::jsonb ->> 'content') IS DISTINCT FROM $3`,
    [id, before, PRUNED_TOOL_OUTPUT],
  );
  await run(
    db,
    `UPDATE tool_calls SET result = $3 WHERE session_id = $1 AND state = 'finished'
        AND finished_at < $2 AND result IS DISTINCT FROM $3`,
    [id, before, PRUNED_TOOL_OUTPUT],
  );
}

async function pruneLooseRows(db: Db, before: number, limit: number): Promise<PruneCounts> {
  const counts = emptyPruneCounts();
  const inbox = `SELECT id FROM inbox WHERE state IN ('done', 'cancelled') AND received_at < $1
                  ORDER BY id LIMIT $2`;
  const ids = (await db.query<{ id: number }>(inbox, [before, limit])).rows.map((r) => r.id);
  for (const table of ["media_steps", "idempotency_keys"]) {
    await run(db, `DELETE FROM ${table} WHERE inbox_id = ANY($1::bigint[])`, [ids]);
  }
  counts.inbox = await run(db, "DELETE FROM inbox WHERE id = ANY($1::bigint[])", [ids]);
  const batch = (table: string, key: string, where: string) =>
    run(
      db,
      `DELETE FROM ${table} WHERE (${key}) IN (SELECT ${key} FROM ${table} WHERE ${where} LIMIT $2)`,
      [before, limit],
    );
  counts.outbox = await batch(
    "outbox",
    "id",
    "state IN ('delivered', 'failed') AND created_at < $1",
  );
  counts.events = await batch("channel_events", "seq", "created_at < $1");
  counts.events += await batch(
    "stream_messages",
    "turn_id, piece",
    "state <> 'open' AND updated_at < $1",
  );
  counts.approvals = await batch(
    "approvals",
    "id",
    "state <> 'pending' AND decided_at IS NOT NULL AND decided_at < $1",
  );
  return counts;
}

export function pgRetention(s: PgContext): RetentionStore {
  return {
    pruneCandidates(cutoffs: RetentionCutoffs, after: string | null, limit: number) {
      return s.read(async (db) =>
        (
          await db.query<{ session_id: string }>(
            `SELECT t.session_id FROM transcripts t WHERE t.session_id > $1 AND (
               ($2::bigint IS NOT NULL AND EXISTS(SELECT 1 FROM messages m
                  WHERE m.session_id = t.session_id AND m.created_at < $2))
               OR ($3::bigint IS NOT NULL AND EXISTS(SELECT 1 FROM messages m
                  WHERE m.session_id = t.session_id AND m.role = 'tool' AND m.created_at < $3
                    AND (m.body::jsonb ->> 'content') IS DISTINCT FROM $4)))
             ORDER BY t.session_id LIMIT $5`,
            [
              after ?? "",
              cutoffs.transcriptsBefore ?? null,
              cutoffs.toolOutputBefore ?? null,
              PRUNED_TOOL_OUTPUT,
              limit,
            ],
          )
        ).rows.map((r) => r.session_id),
      );
    },

    pruneTranscript(sessionId: string, cutoffs: RetentionCutoffs, dryRun: boolean) {
      return settleDryRun(
        s.tx(async (db) => {
          const counts = emptyPruneCounts();
          const row = await first<{ session_key: string }>(
            db,
            "SELECT session_key FROM transcripts WHERE session_id = $1 FOR UPDATE",
            [sessionId],
          );
          if (!row || (await pgSessionHeld(db, row.session_key))) return counts;
          if (cutoffs.transcriptsBefore !== undefined) {
            await pruneMessages(db, sessionId, cutoffs.transcriptsBefore, counts);
          }
          if (cutoffs.toolOutputBefore !== undefined) {
            await pruneToolOutput(db, sessionId, cutoffs.toolOutputBefore, counts);
          }
          if (dryRun) throw new DryRunRollback(counts);
          return counts;
        }),
      );
    },

    idleSessions(before: number, after: string | null, limit: number) {
      return s.read(async (db) =>
        (
          await db.query<{ key: string }>(
            "SELECT key FROM sessions WHERE updated_at < $1 AND key > $2 ORDER BY key LIMIT $3",
            [before, after ?? "", limit],
          )
        ).rows.map((r) => r.key),
      );
    },

    pruneSession(key: string, before: number, dryRun: boolean) {
      return settleDryRun(
        s.tx(async (db) => {
          const row = await first<{ updated_at: number }>(
            db,
            "SELECT updated_at FROM sessions WHERE key = $1 FOR UPDATE",
            [key],
          );
          const scheduled = await first(db, "SELECT 1 FROM schedule_jobs WHERE session_key = $1", [
            key,
          ]);
          if (!row || Number(row.updated_at) >= before || scheduled) return emptyPruneCounts();
          if (await pgSessionHeld(db, key)) return emptyPruneCounts();
          const counts = await pgRemoveSession(db, key);
          if (dryRun) throw new DryRunRollback(counts);
          return counts;
        }),
      );
    },

    pruneLoose(before: number, limit: number, dryRun: boolean) {
      return settleDryRun(
        s.tx(async (db) => {
          const counts = await pruneLooseRows(db, before, limit);
          if (dryRun) throw new DryRunRollback(counts);
          return counts;
        }),
      );
    },

    retentionHolds(): Promise<RetentionHolds> {
      return s.read(async (db) => ({
        transcripts: (
          await db.query<{ session_id: string }>(
            `SELECT session_id FROM transcripts WHERE session_key IN (
               SELECT session_key FROM turns WHERE state = 'running'
               UNION SELECT session_key FROM inbox WHERE state IN ('pending', 'running')
               UNION SELECT session_key FROM outbox WHERE state IN ('pending', 'sending')
               UNION SELECT session_key FROM approvals WHERE state = 'pending'
               UNION SELECT key FROM sessions WHERE resume_pending)
             UNION SELECT session_id FROM tool_calls WHERE state IN ('started', 'awaiting_approval')`,
          )
        ).rows.map((r) => r.session_id),
        fileIds: (
          await db.query<{ file_id: string }>(
            "SELECT file_id FROM outbox WHERE file_id IS NOT NULL AND state IN ('pending', 'sending')",
          )
        ).rows.map((r) => r.file_id),
      }));
    },

    personData: (person) => s.read((db) => pgPersonData(db, person)),
    forgetPerson: (person) => s.tx((db) => pgForgetPerson(db, person)),

    storeCounts(): Promise<StoreCounts> {
      return s.read(async (db) => {
        const row = await first<Record<string, string>>(
          db,
          `SELECT (SELECT MAX(version) FROM keel_schema_version) AS "schemaVersion",
             (SELECT COUNT(*) FROM sessions) AS sessions,
             (SELECT COUNT(*) FROM transcripts) AS transcripts,
             (SELECT COUNT(*) FROM messages) AS messages,
             (SELECT COUNT(*) FROM inbox) AS inbox, (SELECT COUNT(*) FROM outbox) AS outbox`,
        );
        const n = (k: string) => Number(row?.[k] ?? 0);
        return {
          schemaVersion: n("schemaVersion"),
          sessions: n("sessions"),
          transcripts: n("transcripts"),
          messages: n("messages"),
          inbox: n("inbox"),
          outbox: n("outbox"),
        };
      });
    },
  };
}
