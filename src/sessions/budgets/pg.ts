/**
 * BudgetStore (budgets) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, changes, type Db, first, type PgContext } from "../pg-shared.js";
import type { BudgetStore } from "../roles.js";
import type { BudgetPauseRecord } from "../store.js";
import {
  BUDGET_STATE_OF,
  type BudgetPauseRow,
  SPEND_COLUMN,
  SPEND_SUMS,
  type SpendRow,
  toBudgetPause,
  toSpend,
} from "./rows.js";

async function pauseRow(db: Db, id: string): Promise<BudgetPauseRecord | null> {
  const row = await first<BudgetPauseRow>(db, "SELECT * FROM budget_pauses WHERE id = $1", [id]);
  return row ? toBudgetPause(row) : null;
}

export function pgBudgets(s: PgContext): BudgetStore {
  return {
    spend(query) {
      return s.read(async (db) => {
        if (query.scope === null) {
          const sql = `SELECT ${SPEND_SUMS} FROM model_usage WHERE created_at >= $1`;
          return toSpend(await first<SpendRow>(db, sql, [query.since]));
        }
        const column = SPEND_COLUMN[query.scope];
        const sql = `SELECT ${SPEND_SUMS} FROM model_usage WHERE created_at >= $1 AND ${column} = $2`;
        return toSpend(await first<SpendRow>(db, sql, [query.since, query.key]));
      });
    },
    spendByKey(scope, since) {
      const column = SPEND_COLUMN[scope];
      return s.read(async (db) =>
        (
          await all<SpendRow>(
            db,
            `SELECT ${column} AS key, ${SPEND_SUMS} FROM model_usage
             WHERE created_at >= $1 AND ${column} IS NOT NULL GROUP BY ${column}
             ORDER BY SUM(prompt_tokens + completion_tokens) DESC, ${column} LIMIT 500`,
            [since],
          )
        ).map((row) => ({ key: row.key!, ...toSpend(row) })),
      );
    },
    requestBudgetPause(input) {
      return s.tx(async (db) => {
        await db.query(
          `INSERT INTO budget_pauses (id, session_key, session_id, turn_id, budget_id, scope_key,
               period_start, period_end, summary, address, requester, state, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'pending', $12)
             ON CONFLICT (id) DO NOTHING`,
          [
            input.id,
            input.sessionKey,
            input.sessionId,
            input.turnId,
            input.budgetId,
            input.scopeKey,
            input.periodStart,
            input.periodEnd,
            input.summary,
            input.address ? JSON.stringify(input.address) : null,
            input.requester,
            s.now(),
          ],
        );
        return (await pauseRow(db, input.id))!;
      });
    },
    getBudgetPause(id) {
      return s.read((db) => pauseRow(db, id));
    },
    listBudgetPauses(filter = {}) {
      return s.read(async (db) => {
        let rows: BudgetPauseRow[];
        if (filter.dueBy !== undefined) {
          rows = await all<BudgetPauseRow>(
            db,
            "SELECT * FROM budget_pauses WHERE state = 'pending' AND period_end <= $1 ORDER BY period_end, id",
            [filter.dueBy],
          );
        } else if (filter.unapplied) {
          rows = await all<BudgetPauseRow>(
            db,
            `SELECT p.* FROM budget_pauses p
               JOIN sessions s ON s.key = p.session_key AND s.session_id = p.session_id
             WHERE p.state != 'pending' AND NOT p.applied ORDER BY p.decided_at, p.id`,
          );
        } else {
          rows = await all<BudgetPauseRow>(
            db,
            `SELECT * FROM budget_pauses WHERE ($1::text IS NULL OR state = $1)
               AND ($2::text IS NULL OR session_id = $2) AND ($3::text IS NULL OR session_key = $3)
             ORDER BY created_at DESC, id DESC LIMIT 500`,
            [filter.state ?? null, filter.sessionId ?? null, filter.sessionKey ?? null],
          );
        }
        return rows.map(toBudgetPause);
      });
    },
    decideBudgetPause(input) {
      return s.tx(async (db) => {
        const changed = await changes(
          db,
          `UPDATE budget_pauses SET state = $1, decided_by = $2, decided_at = $3
           WHERE id = $4 AND state = 'pending'`,
          [BUDGET_STATE_OF[input.decision], input.decidedBy, s.now(), input.id],
        );
        const record = await pauseRow(db, input.id);
        return record ? { record, changed: changed > 0 } : null;
      });
    },
    async markBudgetPauseApplied(id) {
      await s.tx((db) => db.query("UPDATE budget_pauses SET applied = TRUE WHERE id = $1", [id]));
    },
    countBudgetRaises(budgetId, scopeKey, periodStart) {
      return s.read(async (db) => {
        const row = await first<{ n: number | string }>(
          db,
          `SELECT COUNT(*) AS n FROM budget_pauses WHERE budget_id = $1
             AND scope_key IS NOT DISTINCT FROM $2 AND period_start = $3 AND state = 'raised'`,
          [budgetId, scopeKey, periodStart],
        );
        return Number(row?.n ?? 0);
      });
    },
  };
}
