/**
 * ApprovalStore (approvals) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, changes, type Db, first, type PgContext, pgSql } from "../pg-shared.js";
import type { ApprovalStore } from "../roles.js";
import type {
  ApprovalDecisionInput,
  ApprovalFilter,
  ApprovalRecord,
  ApprovalRequestInput,
} from "../store.js";
import { APPROVAL_STATE_OF, type ApprovalRow, toApproval } from "../store-rows.js";
import * as sql from "./statements.js";

async function approvalRow(db: Db, id: string): Promise<ApprovalRecord | null> {
  const row = await first<ApprovalRow>(db, "SELECT * FROM approvals WHERE id = $1", [id]);
  return row ? toApproval(row) : null;
}

export function pgApprovals(s: PgContext): ApprovalStore {
  return {
    requestApproval(input: ApprovalRequestInput): Promise<ApprovalRecord> {
      return s.tx(async (db) => {
        const existing = await approvalRow(db, input.id);
        if (existing) return existing;
        const now = s.now();
        await db.query(pgSql(sql.AWAIT_TOOL_CALL), sql.awaitToolCallParams(input, now));
        const params = sql.approvalParams(input, now);
        const row = await first<ApprovalRow>(db, pgSql(sql.INSERT_APPROVAL), params);
        return toApproval(row!);
      });
    },

    getApproval(id: string): Promise<ApprovalRecord | null> {
      return s.read((db) => approvalRow(db, id));
    },

    findApprovalForCall(sessionId: string, toolCallId: string): Promise<ApprovalRecord | null> {
      return s.read(async (db) => {
        const row = await first<ApprovalRow>(
          db,
          `SELECT * FROM approvals WHERE session_id = $1 AND tool_call_id = $2
             ORDER BY created_at DESC, seq DESC LIMIT 1`,
          [sessionId, toolCallId],
        );
        return row ? toApproval(row) : null;
      });
    },

    listApprovals(filter: ApprovalFilter = {}): Promise<ApprovalRecord[]> {
      const state = filter.state ?? null;
      // As the SQLite store: the narrowed lists are not capped (approvals/sqlite.ts).
      return s.read(async (db) => {
        let rows: ApprovalRow[];
        if (filter.dueBy !== undefined) {
          rows = await all<ApprovalRow>(
            db,
            `SELECT * FROM approvals WHERE state = 'pending' AND deadline_at <= $1
               ORDER BY deadline_at, seq`,
            [filter.dueBy],
          );
        } else if (filter.sessionId !== undefined || filter.sessionKey !== undefined) {
          const column = filter.sessionId !== undefined ? "session_id" : "session_key";
          rows = await all<ApprovalRow>(
            db,
            `SELECT * FROM approvals WHERE ${column} = $1 AND ($2::text IS NULL OR state = $2)
               ORDER BY created_at DESC, seq DESC`,
            [filter.sessionId ?? filter.sessionKey, state],
          );
        } else {
          rows = await all<ApprovalRow>(
            db,
            `SELECT * FROM approvals WHERE ($1::text IS NULL OR state = $1)
               ORDER BY created_at DESC, seq DESC LIMIT 500`,
            [state],
          );
        }
        return rows.map(toApproval);
      });
    },

    decideApproval(
      input: ApprovalDecisionInput,
    ): Promise<{ record: ApprovalRecord; changed: boolean } | null> {
      return s.tx(async (db) => {
        const now = s.now();
        const state = APPROVAL_STATE_OF[input.decision];
        // Conditional on `pending`: of two answers at once (two gateways), one changes it.
        const changed = await changes(
          db,
          `UPDATE approvals SET state = $1, decision = $2, decided_by = $3, decided_at = $4
             WHERE id = $5 AND state = 'pending'`,
          [state, input.decision, input.decidedBy, now, input.id],
        );
        const record = await approvalRow(db, input.id);
        if (!record) return null;
        if (changed === 0) return { record, changed: false };
        await db.query(
          `UPDATE tool_calls SET state = $1, finished_at = $2
             WHERE turn_id = $3 AND tool_call_id = $4 AND state = 'awaiting_approval'`,
          [state, now, record.turnId, record.toolCallId],
        );
        if (input.decision === "approve_session" && record.asker !== null) {
          for (const unit of record.grants) {
            await db.query(
              `INSERT INTO approval_grants (session_id, asker, grant_unit, granted_by, created_at)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, asker, grant_unit) DO NOTHING`,
              [record.sessionId, record.asker, unit, input.decidedBy, now],
            );
          }
        }
        return { record, changed: true };
      });
    },

    hasApprovalGrants(
      sessionId: string,
      asker: string,
      units: readonly string[],
    ): Promise<boolean> {
      if (units.length === 0) return Promise.resolve(false);
      return s.read(async (db) => {
        const held = await all<{ grant_unit: string }>(
          db,
          `SELECT grant_unit FROM approval_grants
             WHERE session_id = $1 AND asker = $2 AND grant_unit = ANY($3)`,
          [sessionId, asker, [...units]],
        );
        const found = new Set(held.map((r) => r.grant_unit));
        return units.every((unit) => found.has(unit));
      });
    },

    listUnappliedDecisions(): Promise<ApprovalRecord[]> {
      return s.read(async (db) =>
        (
          await all<ApprovalRow>(
            db,
            `SELECT a.* FROM approvals a
               JOIN sessions s ON s.key = a.session_key AND s.session_id = a.session_id
               WHERE a.state != 'pending' AND NOT EXISTS (
                 SELECT 1 FROM tool_calls t WHERE t.session_id = a.session_id
                   AND t.tool_call_id = a.tool_call_id AND t.turn_id > a.turn_id)
               ORDER BY a.decided_at, a.seq`,
          )
        ).map(toApproval),
      );
    },
  };
}
