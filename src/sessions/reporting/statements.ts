/**
 * The reporting queries both engines run, written once with SQLite's `?` placeholders
 * (reporting/pg.ts converts them with pgSql), and the records they give. Where the dialects part
 * (reading JSON, placeholders of the sessions page), the engine passes its own expression.
 */
import type { StoreBacklog } from "../store.js";

/** How an engine reads a field of the origin's JSON. */
export interface SummaryDialect {
  originField(field: "platform" | "chatId"): string;
}

/**
 * A page of session summaries (SessionSummaryRow), newest first: `where` filters `sessions s`,
 * `limit` is the page's size (both as the engine binds them). The transcript's count, tokens and
 * where its first and last messages are come from its row in `transcript_stats` (migration 21),
 * kept as messages and model calls are written: one lookup per listed session, where counting
 * and summing its rows grew with the transcript. The chat's name is the one read left per session.
 */
export function sessionSummaries(d: SummaryDialect, where: string, limit: string): string {
  return `SELECT s.key, s.session_id, s.platform, s.resume_pending, s.suspended, s.updated_at,
    COALESCE(t.messages, 0) AS message_count,
    (SELECT body FROM messages m WHERE m.seq = t.last_seq) AS last_body,
    (SELECT body FROM messages m WHERE m.seq = t.first_user_seq) AS first_user_body,
    (SELECT i.sender_name FROM inbox i
       WHERE i.platform = ${d.originField("platform")} AND i.chat_id = ${d.originField("chatId")}
         AND i.session_key = s.key AND i.sender_name IS NOT NULL
       ORDER BY i.id DESC LIMIT 1) AS sender_name,
    COALESCE(t.prompt_tokens, 0) AS prompt_tokens,
    COALESCE(t.completion_tokens, 0) AS completion_tokens
  FROM sessions s LEFT JOIN transcript_stats t ON t.session_id = s.session_id
  WHERE ${where}
  ORDER BY s.updated_at DESC LIMIT ${limit}`;
}

/** A task's model calls count toward the chat it was started from (its child sessions). */
export const WITH_TASKS = `WHERE session_id = ? OR session_id IN (SELECT s.session_id
  FROM tasks t JOIN sessions s ON s.key = t.child_key WHERE t.root_session_id = ?)`;

export const LAST_TURN_PROMPT = `SELECT prompt_tokens FROM model_usage
  WHERE session_id = ? AND purpose = 'turn' ORDER BY id DESC LIMIT 1`;

/** The four queue sizes of `backlog()`, one statement (a scrape costs one query). */
export const BACKLOG = `SELECT
    (SELECT COUNT(*) FROM inbox WHERE state = 'pending') AS inbox,
    (SELECT COUNT(*) FROM outbox WHERE state = 'pending') AS outbox,
    (SELECT MIN(created_at) FROM outbox WHERE state = 'pending') AS oldest,
    (SELECT COUNT(*) FROM approvals WHERE state = 'pending') AS approvals,
    (SELECT COUNT(*) FROM budget_pauses WHERE state = 'pending') AS pauses`;

/** Postgres gives COUNT as BIGINT, which may arrive as text. */
type Count = number | string;

export interface BacklogRow {
  inbox: Count;
  outbox: Count;
  oldest: Count | null;
  approvals: Count;
  pauses: Count;
}

export function toBacklog(row: BacklogRow): StoreBacklog {
  return {
    inboxPending: Number(row.inbox),
    outboxPending: Number(row.outbox),
    outboxOldestAt: row.oldest === null ? null : Number(row.oldest),
    approvalsPending: Number(row.approvals),
    budgetPausesPending: Number(row.pauses),
  };
}
