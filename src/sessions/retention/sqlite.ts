/**
 * RetentionStore (retention) on SQLite; what each method promises is in roles.ts. Every write is
 * one group-commit method on one transcript, one session or one batch of loose rows, so pruning
 * never holds the write lock for long. A dry run does the same work and rolls it back.
 */

import type {
  PruneCounts,
  RetentionCutoffs,
  RetentionHolds,
  StoreCounts,
} from "../retention-records.js";
import { emptyPruneCounts, PRUNED_TOOL_OUTPUT } from "../retention-records.js";
import type { RetentionStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import { DryRunRollback, settleDryRun } from "./dry-run.js";
import { sqliteForgetPerson, sqlitePersonData } from "./sqlite-person.js";
import { markRewrite, sqliteRemoveSession, sqliteSessionHeld } from "./sqlite-remove.js";
import { EMPTIED_TRANSCRIPT_TABLES } from "./transcript-tables.js";

function pruneMessages(s: SqliteContext, id: string, before: number, counts: PruneCounts): void {
  // The history kept starts at a user message, so no tool result is left without its call.
  const boundary = s
    .stmt(
      "SELECT MIN(seq) FROM messages WHERE session_id = ? AND role = 'user' AND created_at >= ?",
    )
    .pluck()
    .get(id, before) as number | null;
  const cut = boundary ?? Number.MAX_SAFE_INTEGER;
  counts.messages += s
    .stmt("DELETE FROM messages WHERE session_id = ? AND seq < ?")
    .run(id, cut).changes;
  if (counts.messages === 0) return;
  s.stmt("DELETE FROM compactions WHERE session_id = ? AND through_seq < ?").run(id, cut);
  s.stmt(
    `DELETE FROM tool_calls WHERE session_id = ? AND state NOT IN ('started', 'awaiting_approval')
       AND turn_id NOT IN (SELECT turn_id FROM messages WHERE session_id = ? AND turn_id IS NOT NULL)`,
  ).run(id, id);
  const current = s.stmt("SELECT 1 FROM sessions WHERE session_id = ?").get(id);
  if (boundary === null && !current) {
    for (const table of EMPTIED_TRANSCRIPT_TABLES) {
      s.stmt(`DELETE FROM ${table} WHERE session_id = ?`).run(id);
    }
    counts.transcripts += 1;
  }
}

function pruneToolOutput(s: SqliteContext, id: string, before: number, counts: PruneCounts): void {
  counts.toolOutputs += s
    .stmt(
      `UPDATE messages SET body = json_set(body, '$.content', @marker)
        WHERE session_id = @id AND role = 'tool' AND created_at < @before
          AND json_extract(body, '$.content') IS NOT @marker`,
    )
    .run({ id, before, marker: PRUNED_TOOL_OUTPUT }).changes;
  s.stmt(
    `UPDATE tool_calls SET result = @marker
      WHERE session_id = @id AND state = 'finished' AND finished_at < @before
        AND result IS NOT @marker`,
  ).run({ id, before, marker: PRUNED_TOOL_OUTPUT });
}

/** Deletes up to `limit` rows of `table` chosen by `where` (bound to `before`); how many. */
function deleteBatch(
  s: SqliteContext,
  table: string,
  key: string,
  where: string,
  before: number,
  limit: number,
): number {
  return s
    .stmt(
      `DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${where} LIMIT ?)`,
    )
    .run(before, limit).changes;
}

function pruneLooseRows(s: SqliteContext, before: number, limit: number): PruneCounts {
  const counts = emptyPruneCounts();
  const inbox = s
    .stmt("SELECT id FROM inbox WHERE state IN ('done', 'cancelled') AND received_at < ? LIMIT ?")
    .pluck()
    .all(before, limit) as number[];
  for (const id of inbox) {
    s.stmt("DELETE FROM media_steps WHERE inbox_id = ?").run(id);
    s.stmt("DELETE FROM idempotency_keys WHERE inbox_id = ?").run(id);
    counts.inbox += s.stmt("DELETE FROM inbox WHERE id = ?").run(id).changes;
  }
  const finished = "state IN ('delivered', 'failed') AND created_at < ?";
  counts.outbox = deleteBatch(s, "outbox", "id", finished, before, limit);
  counts.events = deleteBatch(s, "channel_events", "seq", "created_at < ?", before, limit);
  counts.events += s
    .stmt(
      `DELETE FROM stream_messages WHERE (turn_id, piece) IN (SELECT turn_id, piece
         FROM stream_messages WHERE state <> 'open' AND updated_at < ? LIMIT ?)`,
    )
    .run(before, limit).changes;
  const decided = "state <> 'pending' AND decided_at IS NOT NULL AND decided_at < ?";
  counts.approvals = deleteBatch(s, "approvals", "id", decided, before, limit);
  return counts;
}

export function sqliteRetention(s: SqliteContext): RetentionStore {
  const count = (table: string) => s.stmt(`SELECT COUNT(*) FROM ${table}`).pluck().get() as number;
  return {
    pruneCandidates(cutoffs: RetentionCutoffs, after: string | null, limit: number) {
      return s.read(
        () =>
          s
            .stmt(
              `SELECT t.session_id FROM transcripts t WHERE t.session_id > @after AND (
                 (@tb IS NOT NULL AND EXISTS(SELECT 1 FROM messages m
                    WHERE m.session_id = t.session_id AND m.created_at < @tb))
                 OR (@ob IS NOT NULL AND EXISTS(SELECT 1 FROM messages m
                    WHERE m.session_id = t.session_id AND m.role = 'tool' AND m.created_at < @ob
                      AND json_extract(m.body, '$.content') IS NOT @marker)))
               ORDER BY t.session_id LIMIT @limit`,
            )
            .pluck()
            .all({
              after: after ?? "",
              tb: cutoffs.transcriptsBefore ?? null,
              ob: cutoffs.toolOutputBefore ?? null,
              marker: PRUNED_TOOL_OUTPUT,
              limit,
            }) as string[],
      );
    },

    pruneTranscript(sessionId: string, cutoffs: RetentionCutoffs, dryRun: boolean) {
      return settleDryRun(
        s.tx(() => {
          const counts = emptyPruneCounts();
          const key = s
            .stmt("SELECT session_key FROM transcripts WHERE session_id = ?")
            .pluck()
            .get(sessionId) as string | undefined;
          if (key === undefined || sqliteSessionHeld(s, key)) return counts;
          if (cutoffs.transcriptsBefore !== undefined) {
            pruneMessages(s, sessionId, cutoffs.transcriptsBefore, counts);
          }
          if (cutoffs.toolOutputBefore !== undefined) {
            pruneToolOutput(s, sessionId, cutoffs.toolOutputBefore, counts);
          }
          if (dryRun) throw new DryRunRollback(counts);
          // The parse of this transcript held here (and in other processes) no longer matches.
          s.transcripts.forget(sessionId);
          if (counts.messages + counts.toolOutputs > 0) markRewrite(s);
          return counts;
        }),
      );
    },

    idleSessions(before: number, after: string | null, limit: number) {
      return s.read(
        () =>
          s
            .stmt("SELECT key FROM sessions WHERE updated_at < ? AND key > ? ORDER BY key LIMIT ?")
            .pluck()
            .all(before, after ?? "", limit) as string[],
      );
    },

    pruneSession(key: string, before: number, dryRun: boolean) {
      return settleDryRun(
        s.tx(() => {
          const updated = s.stmt("SELECT updated_at FROM sessions WHERE key = ?").pluck().get(key);
          const scheduled = s.stmt("SELECT 1 FROM schedule_jobs WHERE session_key = ?").get(key);
          if (typeof updated !== "number" || updated >= before || scheduled) {
            return emptyPruneCounts();
          }
          if (sqliteSessionHeld(s, key)) return emptyPruneCounts();
          const counts = sqliteRemoveSession(s, key);
          if (dryRun) throw new DryRunRollback(counts);
          return counts;
        }),
      );
    },

    pruneLoose(before: number, limit: number, dryRun: boolean) {
      return settleDryRun(
        s.tx(() => {
          const counts = pruneLooseRows(s, before, limit);
          if (dryRun) throw new DryRunRollback(counts);
          return counts;
        }),
      );
    },

    retentionHolds(): Promise<RetentionHolds> {
      return s.read(() => ({
        transcripts: s
          .stmt(
            `SELECT session_id FROM transcripts WHERE session_key IN (
               SELECT session_key FROM turns WHERE state = 'running'
               UNION SELECT session_key FROM inbox WHERE state IN ('pending', 'running')
               UNION SELECT session_key FROM outbox WHERE state IN ('pending', 'sending')
               UNION SELECT session_key FROM approvals WHERE state = 'pending'
               UNION SELECT key FROM sessions WHERE resume_pending = 1)
             UNION SELECT session_id FROM tool_calls WHERE state IN ('started', 'awaiting_approval')`,
          )
          .pluck()
          .all() as string[],
        fileIds: s
          .stmt(
            "SELECT file_id FROM outbox WHERE file_id IS NOT NULL AND state IN ('pending', 'sending')",
          )
          .pluck()
          .all() as string[],
      }));
    },

    personData: (person) => s.read(() => sqlitePersonData(s, person)),
    forgetPerson: (person) => s.tx(() => sqliteForgetPerson(s, person)),

    storeCounts(): Promise<StoreCounts> {
      return s.read(() => ({
        schemaVersion: s.stmt("PRAGMA user_version").pluck().get() as number,
        sessions: count("sessions"),
        transcripts: count("transcripts"),
        messages: count("messages"),
        inbox: count("inbox"),
        outbox: count("outbox"),
      }));
    },
  };
}
