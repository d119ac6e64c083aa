/**
 * ReportingStore (reporting) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, first, type PgContext } from "../pg-shared.js";
import type { ReportingStore } from "../roles.js";
import { INTERNAL_KEY_PREFIX } from "../session-id.js";
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

const USAGE_SUMS = `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0)::bigint AS prompt,
    COALESCE(SUM(completion_tokens), 0)::bigint AS completion,
    COUNT(*) FILTER (WHERE estimated) AS estimated
  FROM model_usage`;

export function pgReporting(s: PgContext): ReportingStore {
  return {
    listSessions(
      options: { limit?: number; platform?: string; internal?: boolean } = {},
    ): Promise<SessionSummary[]> {
      return s.read(async (db) => {
        const rows = await all<SessionSummaryRow>(
          db,
          `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
               (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.session_id) AS message_count,
               (SELECT body FROM messages m WHERE m.session_id = s.session_id
                  ORDER BY seq DESC LIMIT 1) AS last_body,
               (SELECT body FROM messages m WHERE m.session_id = s.session_id AND m.role = 'user'
                  ORDER BY seq LIMIT 1) AS first_user_body,
               (SELECT i.sender_name FROM inbox i
                  WHERE i.platform = (s.origin::json ->> 'platform')
                    AND i.chat_id = (s.origin::json ->> 'chatId')
                    AND i.session_key = s.key AND i.sender_name IS NOT NULL
                  ORDER BY i.id DESC LIMIT 1) AS sender_name,
               u.prompt_tokens, u.completion_tokens
             FROM (SELECT * FROM sessions s
                     WHERE ($1::text IS NULL OR s.platform = $1) AND ($2 OR NOT starts_with(s.key, $3))
                     ORDER BY s.updated_at DESC LIMIT $4) s
             -- Both sums in one pass over the session's model calls (two subqueries read them twice).
             CROSS JOIN LATERAL (
               SELECT COALESCE(SUM(prompt_tokens), 0)::bigint AS prompt_tokens,
                 COALESCE(SUM(completion_tokens), 0)::bigint AS completion_tokens
               FROM model_usage WHERE session_id = s.session_id) u
             ORDER BY s.updated_at DESC`,
          [
            options.platform ?? null,
            options.internal !== false,
            INTERNAL_KEY_PREFIX,
            options.limit ?? 100,
          ],
        );
        return rows.map(toSessionSummary);
      });
    },

    sessionUsage(sessionId: string): Promise<UsageTotals> {
      return s.read(async (db) => {
        // A task's model calls count toward the chat it was started from (its child sessions).
        const totals = (await first<UsageSumsRow>(
          db,
          `${USAGE_SUMS} WHERE session_id = $1 OR session_id IN (SELECT s.session_id
             FROM tasks t JOIN sessions s ON s.key = t.child_key WHERE t.root_session_id = $1)`,
          [sessionId],
        ))!;
        const last = await first<{ prompt_tokens: number }>(
          db,
          `SELECT prompt_tokens FROM model_usage WHERE session_id = $1 AND purpose = 'turn'
             ORDER BY id DESC LIMIT 1`,
          [sessionId],
        );
        return toUsageTotals(totals, last?.prompt_tokens ?? null);
      });
    },

    totalUsage(): Promise<UsageTotals> {
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

    backlog(): Promise<StoreBacklog> {
      return s.read(async (db) => {
        const row = await first<{
          inbox: string | number;
          outbox: string | number;
          oldest: string | number | null;
          approvals: string | number;
          pauses: string | number;
        }>(db, BACKLOG);
        return {
          inboxPending: Number(row!.inbox),
          outboxPending: Number(row!.outbox),
          outboxOldestAt: row!.oldest === null ? null : Number(row!.oldest),
          approvalsPending: Number(row!.approvals),
          budgetPausesPending: Number(row!.pauses),
        };
      });
    },
  };
}
