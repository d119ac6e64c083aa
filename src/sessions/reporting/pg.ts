/**
 * ReportingStore (reporting) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, first, type PgContext, pgSql } from "../pg-shared.js";
import type { ReportingStore } from "../roles.js";
import { INTERNAL_KEY_PREFIX } from "../session-id.js";
import {
  type SessionSummaryRow,
  toSessionSummary,
  toUsageTotals,
  type UsageSumsRow,
} from "../store-rows.js";
import * as sql from "./statements.js";

const SESSION_SUMMARIES = sql.sessionSummaries(
  { originField: (field) => `(s.origin::json ->> '${field}')` },
  "($1::text IS NULL OR s.platform = $1) AND ($2 OR NOT starts_with(s.key, $3))",
  "$4",
);

/** The sums of `model_usage` rows (UsageSumsRow); a WHERE clause may follow. */
const USAGE_SUMS = `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0)::bigint AS prompt,
    COALESCE(SUM(completion_tokens), 0)::bigint AS completion,
    COUNT(*) FILTER (WHERE estimated) AS estimated
  FROM model_usage`;

export function pgReporting(s: PgContext): ReportingStore {
  return {
    listSessions(options = {}) {
      return s.read(async (db) => {
        const rows = await all<SessionSummaryRow>(db, SESSION_SUMMARIES, [
          options.platform ?? null,
          options.internal !== false,
          INTERNAL_KEY_PREFIX,
          options.limit ?? 100,
        ]);
        return rows.map(toSessionSummary);
      });
    },

    sessionUsage(sessionId) {
      return s.read(async (db) => {
        const totals = (await first<UsageSumsRow>(db, pgSql(`${USAGE_SUMS} ${sql.WITH_TASKS}`), [
          sessionId,
          sessionId,
        ]))!;
        const last = await first<{ prompt_tokens: number }>(db, pgSql(sql.LAST_TURN_PROMPT), [
          sessionId,
        ]);
        return toUsageTotals(totals, last?.prompt_tokens ?? null);
      });
    },

    totalUsage() {
      return s.read(async (db) => {
        // Kept by a trigger on model_usage in 16 shards (migration 18): summing every call grew
        // with age.
        const totals = (await first<UsageSumsRow>(
          db,
          `SELECT SUM(calls)::bigint AS calls, SUM(prompt)::bigint AS prompt,
             SUM(completion)::bigint AS completion, SUM(estimated)::bigint AS estimated
           FROM store_totals`,
        ))!;
        return toUsageTotals(totals, null);
      });
    },

    countSessions(): Promise<{ total: number; resumePending: number }> {
      return s.read(async (db) => {
        const row = await first<{ total: number; pending: number }>(
          db,
          // The total kept by a trigger (migration 18), the few pending ones by their index.
          `SELECT (SELECT SUM(sessions)::bigint FROM store_totals) AS total,
             (SELECT COUNT(*) FROM sessions WHERE resume_pending) AS pending`,
        );
        return { total: row!.total, resumePending: row!.pending };
      });
    },

    backlog() {
      return s.read(async (db) => {
        return sql.toBacklog((await first<sql.BacklogRow>(db, sql.BACKLOG))!);
      });
    },
  };
}
