/**
 * The approval statements that both engines run, written once with SQLite's `?` placeholders
 * (approvals/pg.ts converts them with pgSql), and the parameters they take.
 */
import type { ApprovalRequestInput } from "../store.js";

/** The call an approval holds, recorded as awaiting it. */
export const AWAIT_TOOL_CALL = `INSERT INTO tool_calls (tool_call_id, turn_id, session_id, name,
    arguments, state, started_at)
  VALUES (?, ?, ?, ?, ?, 'awaiting_approval', ?)
  ON CONFLICT (turn_id, tool_call_id) DO UPDATE SET state = 'awaiting_approval'`;

export function awaitToolCallParams(input: ApprovalRequestInput, now: number): unknown[] {
  return [input.toolCallId, input.turnId, input.sessionId, input.toolName, input.arguments, now];
}

export const INSERT_APPROVAL = `INSERT INTO approvals (id, session_key, session_id, turn_id,
    tool_call_id, tool_name, summary, rule, reason, address, requester, asker, grants, state,
    created_at, deadline_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING *`;

export function approvalParams(input: ApprovalRequestInput, now: number): unknown[] {
  const { id, sessionKey, sessionId, turnId, toolCallId, toolName } = input;
  const address = input.address ? JSON.stringify(input.address) : null;
  return [
    ...[id, sessionKey, sessionId, turnId, toolCallId, toolName],
    ...[input.summary, input.rule, input.reason, address, input.requester, input.asker],
    ...[JSON.stringify(input.grants), now, input.deadlineAt],
  ];
}
