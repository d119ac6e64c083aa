/**
 * The outbox's statements that both engines run, written once with SQLite's `?` placeholders
 * (outbox/pg.ts converts them with pgSql), and the rows its methods queue.
 */
import type { OnceNoticeInput, OutboxInput, RequestNoticeInput } from "../store.js";
import type { NewOutboxRow } from "../store-rows.js";

/** The row `enqueueOutbox` queues: one the caller sends itself (`direct`) is already sending. */
export function queuedRow(input: OutboxInput): NewOutboxRow {
  const { sessionKey, sessionId, address, text, kind, approvalId } = input;
  const state = input.direct ? "sending" : "pending";
  return { sessionKey, sessionId, turnId: null, address, text, kind, state, approvalId };
}

/** A notice's row, in the transcript `sessionId`. */
export function noticeRow(
  input: RequestNoticeInput | OnceNoticeInput,
  sessionId: string,
): NewOutboxRow {
  const { sessionKey, address, text } = input;
  return { sessionKey, sessionId, turnId: null, address, text, kind: "notice" };
}

export const SET_REQUEST_NOTICE = "UPDATE sessions SET request_notice = ? WHERE key = ?";

export const NOTE_ONCE = `INSERT INTO session_notices (session_id, notice, created_at) VALUES (?, ?, ?)
  ON CONFLICT (session_id, notice) DO NOTHING`;

/** The pending rows with their files; each engine adds its index hint and platform filter. */
export const PENDING_COLUMNS = `o.*, f.path AS file_path, f.name AS file_name, f.mime AS file_mime,
  f.size AS file_size`;

export const MARK_DELIVERED = `UPDATE outbox SET state = 'delivered', delivered_at = ?,
    attempts = attempts + 1
  WHERE id = ?`;

export const MARK_DELIVERY_FAILED = `UPDATE outbox SET attempts = attempts + 1,
    state = CASE WHEN attempts + 1 >= ? THEN 'failed' ELSE state END
  WHERE id = ? AND state IN ('pending', 'sending')`;
