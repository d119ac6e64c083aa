/**
 * ReportingStore (reporting) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ReportingStore } from "../roles.js";
import { INTERNAL_KEY_PREFIX } from "../session-id.js";
import type { SqliteContext } from "../sqlite-shared.js";
import {
  type SessionSummaryRow,
  toSessionSummary,
  toUsageTotals,
  type UsageSumsRow,
} from "../store-rows.js";
import * as sql from "./statements.js";

const SESSION_SUMMARIES = sql.sessionSummaries(
  { originField: (field) => `json_extract(s.origin, '$.${field}')` },
  "(? IS NULL OR s.platform = ?) AND (? = 1 OR substr(s.key, 1, ?) <> ?)",
  "?",
);

/** The sums of `model_usage` rows (UsageSumsRow); a WHERE clause may follow. */
const USAGE_SUMS = `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
    COALESCE(SUM(completion_tokens), 0) AS completion, COALESCE(SUM(estimated), 0) AS estimated
  FROM model_usage`;

export function sqliteReporting(s: SqliteContext): ReportingStore {
  return {
    listSessions(options = {}) {
      return s.read(() => {
        const rows = s
          .stmt(SESSION_SUMMARIES)
          .all(
            options.platform ?? null,
            options.platform ?? null,
            options.internal === false ? 0 : 1,
            INTERNAL_KEY_PREFIX.length,
            INTERNAL_KEY_PREFIX,
            options.limit ?? 100,
          ) as SessionSummaryRow[];
        return rows.map(toSessionSummary);
      });
    },

    sessionUsage(sessionId) {
      return s.read(() => {
        const totals = s
          .stmt(`${USAGE_SUMS} ${sql.WITH_TASKS}`)
          .get(sessionId, sessionId) as UsageSumsRow;
        const last = s.stmt(sql.LAST_TURN_PROMPT).get(sessionId) as
          | { prompt_tokens: number }
          | undefined;
        return toUsageTotals(totals, last?.prompt_tokens ?? null);
      });
    },

    totalUsage() {
      return s.read(() => {
        // Kept by a trigger on model_usage (migration 18): summing every call grew with age.
        const totals = s
          .stmt("SELECT calls, prompt, completion, estimated FROM store_totals WHERE shard = 0")
          .get() as UsageSumsRow;
        return toUsageTotals(totals, null);
      });
    },

    countSessions(): Promise<{ total: number; resumePending: number }> {
      return s.read(() => {
        const row = s
          .stmt(
            // The total kept by a trigger (migration 18), the few pending ones by their index.
            `SELECT (SELECT sessions FROM store_totals WHERE shard = 0) AS total,
               (SELECT COUNT(*) FROM sessions WHERE resume_pending = 1) AS pending`,
          )
          .get() as { total: number; pending: number };
        return { total: row.total, resumePending: row.pending };
      });
    },

    backlog() {
      return s.read(() => {
        return sql.toBacklog(s.stmt(sql.BACKLOG).get() as sql.BacklogRow);
      });
    },
  };
}
