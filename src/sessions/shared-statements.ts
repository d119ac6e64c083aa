/**
 * Statements more than one role runs, on both engines, written once with SQLite's `?`
 * placeholders (Postgres converts them with pg-shared.ts `pgSql`), and the parameters they take.
 */
import type { NewOutboxRow } from "./store-rows.js";

export const INSERT_OUTBOX = `INSERT INTO outbox (session_key, session_id, turn_id, platform, address,
    text, kind, state, created_at, delivered_at, inbox_id, approval_id, queued_by)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`;

/** A new outbox row's values; a row stored delivered (an in-band reply) is delivered now. */
export function outboxParams(row: NewOutboxRow, now: number, queuedBy: string | null): unknown[] {
  const state = row.state ?? "pending";
  const { sessionKey, sessionId, turnId, address } = row;
  return [
    ...[sessionKey, sessionId, turnId, address.platform, JSON.stringify(address)],
    ...[row.text, row.kind, state, now, state === "delivered" ? now : null],
    ...[row.inboxId ?? null, row.approvalId ?? null, queuedBy],
  ];
}

export const INSERT_TRANSCRIPT =
  "INSERT INTO transcripts (session_id, session_key, platform, created_at) VALUES (?, ?, ?, ?)";
