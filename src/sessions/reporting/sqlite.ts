/**
 * ReportingStore (reporting) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ReportingStore } from "../roles.js";
import { INTERNAL_KEY_PREFIX } from "../session-id.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type { SessionSummary, StoreBacklog, UsageTotals } from "../store.js";
import {
  type SessionSummaryRow,
  toSessionSummary,
  toUsageTotals,
  type UsageSumsRow,
} from "../store-rows.js";

/** The sums of `model_usage` rows (UsageSumsRow); a WHERE clause may follow. */
/** The four queue sizes of `backlog()`, one statement (a scrape costs one query). */
const BACKLOG = `SELECT
    (SELECT COUNT(*) FROM inbox WHERE state = 'pending') AS inbox,
    (SELECT COUNT(*) FROM outbox WHERE state = 'pending') AS outbox,
    (SELECT MIN(created_at) FROM outbox WHERE state = 'pending') AS oldest,
    (SELECT COUNT(*) FROM approvals WHERE state = 'pending') AS approvals,
    (SELECT COUNT(*) FROM budget_pauses WHERE state = 'pending') AS pauses`;

interface BacklogRow {
  inbox: number;
  outbox: number;
  oldest: number | null;
  approvals: number;
  pauses: number;
}

const USAGE_SUMS = `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
    COALESCE(SUM(completion_tokens), 0) AS completion, COALESCE(SUM(estimated), 0) AS estimated
  FROM model_usage`;

export function sqliteReporting(s: SqliteContext): ReportingStore {
  return {
    listSessions(
      options: { limit?: number; platform?: string; internal?: boolean } = {},
    ): Promise<SessionSummary[]> {
      return s.read(() => {
        const rows = s
          .stmt(
            `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
               (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count,
               (SELECT body FROM messages m WHERE m.session_id = s.session_id ORDER BY seq DESC LIMIT 1) AS last_body,
               (SELECT body FROM messages m WHERE m.session_id = s.session_id AND m.role = 'user'
                  ORDER BY seq LIMIT 1) AS first_user_body,
               (SELECT i.sender_name FROM inbox i
                  WHERE i.platform = json_extract(s.origin, '$.platform')
                    AND i.chat_id = json_extract(s.origin, '$.chatId')
                    AND i.session_key = s.key AND i.sender_name IS NOT NULL
                  ORDER BY i.id DESC LIMIT 1) AS sender_name,
               (SELECT COALESCE(SUM(u.prompt_tokens), 0) FROM model_usage u
                  WHERE u.session_id = s.session_id) AS prompt_tokens,
               (SELECT COALESCE(SUM(u.completion_tokens), 0) FROM model_usage u
                  WHERE u.session_id = s.session_id) AS completion_tokens
             FROM sessions s
             WHERE (? IS NULL OR s.platform = ?) AND (? = 1 OR substr(s.key, 1, ?) <> ?)
             ORDER BY s.updated_at DESC LIMIT ?`,
          )
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

    sessionUsage(sessionId: string): Promise<UsageTotals> {
      return s.read(() => {
        // A task's model calls count toward the chat it was started from (its child sessions).
        const totals = s
          .stmt(
            `${USAGE_SUMS} WHERE session_id = ? OR session_id IN (SELECT s.session_id
               FROM tasks t JOIN sessions s ON s.key = t.child_key WHERE t.root_session_id = ?)`,
          )
          .get(sessionId, sessionId) as UsageSumsRow;
        const last = s
          .stmt(
            `SELECT prompt_tokens FROM model_usage WHERE session_id = ? AND purpose = 'turn'
             ORDER BY id DESC LIMIT 1`,
          )
          .get(sessionId) as { prompt_tokens: number } | undefined;
        return toUsageTotals(totals, last?.prompt_tokens ?? null);
      });
    },

    totalUsage(): Promise<UsageTotals> {
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

    backlog(): Promise<StoreBacklog> {
      return s.read(() => {
        const row = s.stmt(BACKLOG).get() as BacklogRow;
        return {
          inboxPending: row.inbox,
          outboxPending: row.outbox,
          outboxOldestAt: row.oldest,
          approvalsPending: row.approvals,
          budgetPausesPending: row.pauses,
        };
      });
    },
  };
}
