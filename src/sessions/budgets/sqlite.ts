/**
 * BudgetStore (budgets) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { BudgetStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type {
  BudgetDecision,
  BudgetPauseFilter,
  BudgetPauseInput,
  BudgetPauseRecord,
} from "../store.js";
import * as budget from "./rows.js";

function pauseSync(s: SqliteContext, id: string): BudgetPauseRecord | null {
  const row = s.stmt("SELECT * FROM budget_pauses WHERE id = ?").get(id) as
    | budget.BudgetPauseRow
    | undefined;
  return row ? budget.toBudgetPause(row) : null;
}

function listSync(s: SqliteContext, filter: BudgetPauseFilter): BudgetPauseRecord[] {
  let rows: unknown[];
  if (filter.dueBy !== undefined) {
    rows = s
      .stmt(
        "SELECT * FROM budget_pauses WHERE state = 'pending' AND period_end <= ? ORDER BY period_end, rowid",
      )
      .all(filter.dueBy);
  } else if (filter.unapplied) {
    // Only transcripts their session still uses: after `/new` nothing is left to continue.
    rows = s
      .stmt(
        `SELECT p.* FROM budget_pauses p
           JOIN sessions s ON s.key = p.session_key AND s.session_id = p.session_id
         WHERE p.state != 'pending' AND p.applied = 0 ORDER BY p.decided_at, p.rowid`,
      )
      .all();
  } else {
    const state = filter.state ?? null;
    const sessionId = filter.sessionId ?? null;
    const sessionKey = filter.sessionKey ?? null;
    rows = s
      .stmt(
        `SELECT * FROM budget_pauses WHERE (? IS NULL OR state = ?) AND (? IS NULL OR session_id = ?)
           AND (? IS NULL OR session_key = ?) ORDER BY created_at DESC, rowid DESC LIMIT 500`,
      )
      .all(state, state, sessionId, sessionId, sessionKey, sessionKey);
  }
  return (rows as budget.BudgetPauseRow[]).map(budget.toBudgetPause);
}

function requestSync(s: SqliteContext, input: BudgetPauseInput): BudgetPauseRecord {
  const existing = pauseSync(s, input.id);
  if (existing) return existing;
  s.stmt(budget.INSERT_PAUSE).run(...budget.pauseParams(input, s.now()));
  return pauseSync(s, input.id)!;
}

function decideSync(
  s: SqliteContext,
  input: { id: string; decision: BudgetDecision; decidedBy: string | null },
): { record: BudgetPauseRecord; changed: boolean } | null {
  const { changes } = s.stmt(budget.DECIDE_PAUSE).run(...budget.decideParams(input, s.now()));
  const record = pauseSync(s, input.id);
  return record ? { record, changed: changes > 0 } : null;
}

export function sqliteBudgets(s: SqliteContext): BudgetStore {
  return {
    spend(query) {
      return s.read(() => {
        if (query.scope === null) {
          const sql = `SELECT ${budget.SPEND_SUMS} FROM model_usage WHERE created_at >= ?`;
          return budget.toSpend(s.stmt(sql).get(query.since) as budget.SpendRow);
        }
        const column = budget.SPEND_COLUMN[query.scope];
        const sql = `SELECT ${budget.SPEND_SUMS} FROM model_usage WHERE created_at >= ? AND ${column} = ?`;
        return budget.toSpend(s.stmt(sql).get(query.since, query.key) as budget.SpendRow);
      });
    },
    spendByKey(scope, since) {
      const column = budget.SPEND_COLUMN[scope];
      return s.read(() =>
        (s.stmt(budget.spendByKeySql(column)).all(since) as budget.SpendRow[]).map((row) => ({
          key: row.key!,
          ...budget.toSpend(row),
        })),
      );
    },
    requestBudgetPause(input) {
      return s.tx(() => requestSync(s, input));
    },
    getBudgetPause(id) {
      return s.read(() => pauseSync(s, id));
    },
    listBudgetPauses(filter = {}) {
      return s.read(() => listSync(s, filter));
    },
    decideBudgetPause(input) {
      return s.tx(() => decideSync(s, input));
    },
    async markBudgetPauseApplied(id) {
      await s.tx(() => {
        s.stmt("UPDATE budget_pauses SET applied = 1 WHERE id = ?").run(id);
      });
    },
    countBudgetRaises(budgetId, scopeKey, periodStart) {
      return s.read(
        () =>
          s
            .stmt(
              `SELECT COUNT(*) FROM budget_pauses WHERE budget_id = ? AND scope_key IS ?
                 AND period_start = ? AND state = 'raised'`,
            )
            .pluck()
            .get(budgetId, scopeKey, periodStart) as number,
      );
    },
  };
}
