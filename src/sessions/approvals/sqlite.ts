/**
 * ApprovalStore (approvals) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ApprovalStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type {
  ApprovalDecisionInput,
  ApprovalFilter,
  ApprovalRecord,
  ApprovalRequestInput,
} from "../store.js";
import { APPROVAL_STATE_OF, type ApprovalRow, toApproval } from "../store-rows.js";
import * as sql from "./statements.js";

function getApprovalSync(s: SqliteContext, id: string): ApprovalRecord | null {
  const row = s.stmt("SELECT * FROM approvals WHERE id = ?").get(id) as ApprovalRow | undefined;
  return row ? toApproval(row) : null;
}

function requestApprovalSync(
  s: SqliteContext,
  input: ApprovalRequestInput,
  now: number,
): ApprovalRecord {
  const existing = getApprovalSync(s, input.id);
  if (existing) return existing;
  s.stmt(sql.AWAIT_TOOL_CALL).run(...sql.awaitToolCallParams(input, now));
  return toApproval(
    s.stmt(sql.INSERT_APPROVAL).get(...sql.approvalParams(input, now)) as ApprovalRow,
  );
}

function findApprovalForCallSync(
  s: SqliteContext,
  sessionId: string,
  toolCallId: string,
): ApprovalRecord | null {
  const row = s
    .stmt(
      "SELECT * FROM approvals WHERE session_id = ? AND tool_call_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
    )
    .get(sessionId, toolCallId) as ApprovalRow | undefined;
  return row ? toApproval(row) : null;
}

function listApprovalsSync(s: SqliteContext, filter: ApprovalFilter): ApprovalRecord[] {
  const state = filter.state ?? null;
  // The narrowed lists are not capped: every turn and every deadline check asks one of them, and
  // missing a row past a cap would leave it waiting for good. Due and per-transcript ones go
  // through an index; per-session (`/approve` without an id) scans the table.
  let rows: unknown[];
  if (filter.dueBy !== undefined) {
    rows = s
      .stmt(
        `SELECT * FROM approvals WHERE state = 'pending' AND deadline_at <= ?
         ORDER BY deadline_at, rowid`,
      )
      .all(filter.dueBy);
  } else if (filter.sessionId !== undefined || filter.sessionKey !== undefined) {
    const [column, value] =
      filter.sessionId !== undefined
        ? ["session_id", filter.sessionId]
        : ["session_key", filter.sessionKey];
    rows = s
      .stmt(
        `SELECT * FROM approvals WHERE ${column} = ? AND (? IS NULL OR state = ?)
         ORDER BY created_at DESC, rowid DESC`,
      )
      .all(value, state, state);
  } else {
    rows = s
      .stmt(
        "SELECT * FROM approvals WHERE (? IS NULL OR state = ?) ORDER BY created_at DESC, rowid DESC LIMIT 500",
      )
      .all(state, state);
  }
  return (rows as ApprovalRow[]).map(toApproval);
}

function decideApprovalSync(
  s: SqliteContext,
  input: ApprovalDecisionInput,
  now: number,
): { record: ApprovalRecord; changed: boolean } | null {
  const state = APPROVAL_STATE_OF[input.decision];
  const { changes } = s
    .stmt(
      `UPDATE approvals SET state = ?, decision = ?, decided_by = ?, decided_at = ?
       WHERE id = ? AND state = 'pending'`,
    )
    .run(state, input.decision, input.decidedBy, now, input.id);
  const record = getApprovalSync(s, input.id);
  if (!record) return null;
  if (changes === 0) return { record, changed: false };
  s.stmt(
    `UPDATE tool_calls SET state = ?, finished_at = ?
       WHERE turn_id = ? AND tool_call_id = ? AND state = 'awaiting_approval'`,
  ).run(state, now, record.turnId, record.toolCallId);
  if (input.decision === "approve_session" && record.asker !== null) {
    const grant = s.stmt(
      `INSERT INTO approval_grants (session_id, asker, grant_unit, granted_by, created_at)
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, asker, grant_unit) DO NOTHING`,
    );
    for (const unit of record.grants) {
      grant.run(record.sessionId, record.asker, unit, input.decidedBy, now);
    }
  }
  return { record, changed: true };
}

function hasApprovalGrantsSync(
  s: SqliteContext,
  sessionId: string,
  asker: string,
  units: readonly string[],
): boolean {
  if (units.length === 0) return false;
  const held = s.stmt(
    "SELECT 1 FROM approval_grants WHERE session_id = ? AND asker = ? AND grant_unit = ?",
  );
  return units.every((unit) => held.get(sessionId, asker, unit) !== undefined);
}

function listUnappliedDecisionsSync(s: SqliteContext): ApprovalRecord[] {
  return (
    s
      .stmt(
        `SELECT a.* FROM approvals a JOIN sessions s ON s.key = a.session_key AND s.session_id = a.session_id
         WHERE a.state != 'pending' AND NOT EXISTS (
           SELECT 1 FROM tool_calls t WHERE t.session_id = a.session_id
             AND t.tool_call_id = a.tool_call_id AND t.turn_id > a.turn_id)
         ORDER BY a.decided_at, a.rowid`,
      )
      .all() as ApprovalRow[]
  ).map(toApproval);
}

export function sqliteApprovals(s: SqliteContext): ApprovalStore {
  return {
    requestApproval(input: ApprovalRequestInput): Promise<ApprovalRecord> {
      return s.tx(() => requestApprovalSync(s, input, s.now()));
    },

    getApproval(id: string): Promise<ApprovalRecord | null> {
      return s.read(() => getApprovalSync(s, id));
    },

    findApprovalForCall(sessionId: string, toolCallId: string): Promise<ApprovalRecord | null> {
      return s.read(() => findApprovalForCallSync(s, sessionId, toolCallId));
    },

    listApprovals(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
      return s.read(() => listApprovalsSync(s, filter));
    },

    decideApproval(
      input: ApprovalDecisionInput,
    ): Promise<{ record: ApprovalRecord; changed: boolean } | null> {
      return s.tx(() => decideApprovalSync(s, input, s.now()));
    },

    hasApprovalGrants(
      sessionId: string,
      asker: string,
      units: readonly string[],
    ): Promise<boolean> {
      return s.read(() => hasApprovalGrantsSync(s, sessionId, asker, units));
    },

    listUnappliedDecisions(): Promise<ApprovalRecord[]> {
      return s.read(() => listUnappliedDecisionsSync(s));
    },
  };
}
