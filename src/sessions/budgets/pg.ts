/**
 * BudgetStore (budgets) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, changes, type Db, first, type PgContext, pgSql } from "../pg-shared.js";
import type { BudgetStore } from "../roles.js";
import type { BudgetPauseRecord } from "../store.js";
import * as budget from "./rows.js";

async function pauseRow(db: Db, id: string): Promise<BudgetPauseRecord | null> {
  const row = await first<budget.BudgetPauseRow>(db, "SELECT * FROM budget_pauses WHERE id = $1", [
    id,
  ]);
  return row ? budget.toBudgetPause(row) : null;
}

export function pgBudgets(s: PgContext): BudgetStore {
  return {
    spend(query) {
      return s.read(async (db) => {
        if (query.scope === null) {
          const sql = `SELECT ${budget.SPEND_SUMS} FROM model_usage WHERE created_at >= $1`;
          return budget.toSpend(await first<budget.SpendRow>(db, sql, [query.since]));
        }
        const column = budget.SPEND_COLUMN[query.scope];
        const sql = `SELECT ${budget.SPEND_SUMS} FROM model_usage WHERE created_at >= $1 AND ${column} = $2`;
        return budget.toSpend(await first<budget.SpendRow>(db, sql, [query.since, query.key]));
      });
    },
    spendByKey(scope, since) {
      const column = budget.SPEND_COLUMN[scope];
      return s.read(async (db) =>
        (await all<budget.SpendRow>(db, pgSql(budget.spendByKeySql(column)), [since])).map(
          (row) => ({ key: row.key!, ...budget.toSpend(row) }),
        ),
      );
    },
    requestBudgetPause(input) {
      return s.tx(async (db) => {
        await db.query(pgSql(budget.INSERT_PAUSE), budget.pauseParams(input, s.now()));
        return (await pauseRow(db, input.id))!;
      });
    },
    getBudgetPause(id) {
      return s.read((db) => pauseRow(db, id));
    },
    listBudgetPauses(filter = {}) {
      return s.read(async (db) => {
        let rows: budget.BudgetPauseRow[];
        if (filter.dueBy !== undefined) {
          rows = await all<budget.BudgetPauseRow>(
            db,
            "SELECT * FROM budget_pauses WHERE state = 'pending' AND period_end <= $1 ORDER BY period_end, id",
            [filter.dueBy],
          );
        } else if (filter.unapplied) {
          rows = await all<budget.BudgetPauseRow>(
            db,
            `SELECT p.* FROM budget_pauses p
               JOIN sessions s ON s.key = p.session_key AND s.session_id = p.session_id
             WHERE p.state != 'pending' AND NOT p.applied ORDER BY p.decided_at, p.id`,
          );
        } else {
          rows = await all<budget.BudgetPauseRow>(
            db,
            `SELECT * FROM budget_pauses WHERE ($1::text IS NULL OR state = $1)
               AND ($2::text IS NULL OR session_id = $2) AND ($3::text IS NULL OR session_key = $3)
             ORDER BY created_at DESC, id DESC LIMIT 500`,
            [filter.state ?? null, filter.sessionId ?? null, filter.sessionKey ?? null],
          );
        }
        return rows.map(budget.toBudgetPause);
      });
    },
    decideBudgetPause(input) {
      return s.tx(async (db) => {
        const changed = await changes(
          db,
          pgSql(budget.DECIDE_PAUSE),
          budget.decideParams(input, s.now()),
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
