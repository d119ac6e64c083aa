/** The `budget_pauses` row and the spend queries both stores share. */
import type { ChatAddress } from "../../contract/platform.js";
import type {
  BudgetDecision,
  BudgetPauseInput,
  BudgetPauseRecord,
  BudgetPauseState,
  SpendScope,
  SpendTotals,
} from "../budget-records.js";

export interface BudgetPauseRow {
  id: string;
  session_key: string;
  session_id: string;
  turn_id: number | null;
  budget_id: string;
  scope_key: string | null;
  period_start: number;
  period_end: number;
  summary: string;
  address: string | null;
  requester: string | null;
  state: string;
  decided_by: string | null;
  decided_at: number | null;
  applied: number | boolean;
  created_at: number;
}

export function toBudgetPause(r: BudgetPauseRow): BudgetPauseRecord {
  return {
    id: r.id,
    sessionKey: r.session_key,
    sessionId: r.session_id,
    turnId: r.turn_id === null ? null : Number(r.turn_id),
    budgetId: r.budget_id,
    scopeKey: r.scope_key,
    periodStart: Number(r.period_start),
    periodEnd: Number(r.period_end),
    summary: r.summary,
    address: r.address ? (JSON.parse(r.address) as ChatAddress) : null,
    requester: r.requester,
    state: r.state as BudgetPauseState,
    decidedBy: r.decided_by,
    decidedAt: r.decided_at === null ? null : Number(r.decided_at),
    applied: r.applied === true || r.applied === 1,
    createdAt: Number(r.created_at),
  };
}

export const BUDGET_STATE_OF: Record<BudgetDecision, BudgetPauseState> = {
  approve: "approved",
  raise: "raised",
  deny: "denied",
  expire: "expired",
};

/** The `model_usage` column each scope's key is kept in (never user input: a fixed map). */
export const SPEND_COLUMN: Record<SpendScope, string> = {
  chat: "chat_key",
  user: "user_key",
  task: "task_key",
  schedule: "schedule_key",
};

export interface SpendRow {
  key?: string;
  calls: number | string;
  prompt: number | string;
  completion: number | string;
}

export function toSpend(r: SpendRow | undefined): SpendTotals {
  return {
    calls: Number(r?.calls ?? 0),
    promptTokens: Number(r?.prompt ?? 0),
    completionTokens: Number(r?.completion ?? 0),
  };
}

export const SPEND_SUMS = `COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
    COALESCE(SUM(completion_tokens), 0) AS completion`;

/** The spend of every key of `column` since a time (`?`), the largest first. */
export function spendByKeySql(column: string): string {
  return `SELECT ${column} AS key, ${SPEND_SUMS} FROM model_usage
    WHERE created_at >= ? AND ${column} IS NOT NULL GROUP BY ${column}
    ORDER BY SUM(prompt_tokens + completion_tokens) DESC, ${column} LIMIT 500`;
}

/** With SQLite's `?` placeholders, as both engines run it (Postgres through pgSql). */
export const INSERT_PAUSE = `INSERT INTO budget_pauses (id, session_key, session_id, turn_id,
    budget_id, scope_key, period_start, period_end, summary, address, requester, state, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)
  ON CONFLICT (id) DO NOTHING`;

export function pauseParams(input: BudgetPauseInput, now: number): unknown[] {
  const { id, sessionKey, sessionId, turnId, budgetId, scopeKey } = input;
  const address = input.address ? JSON.stringify(input.address) : null;
  return [
    ...[id, sessionKey, sessionId, turnId, budgetId, scopeKey],
    ...[input.periodStart, input.periodEnd, input.summary, address, input.requester, now],
  ];
}

export const DECIDE_PAUSE = `UPDATE budget_pauses SET state = ?, decided_by = ?, decided_at = ?
  WHERE id = ? AND state = 'pending'`;

export function decideParams(
  input: { id: string; decision: BudgetDecision; decidedBy: string | null },
  now: number,
): unknown[] {
  return [BUDGET_STATE_OF[input.decision], input.decidedBy, now, input.id];
}
