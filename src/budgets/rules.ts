/**
 * Budgets as configured, and where each stands: what was spent in its current period under a
 * scope key (from the recorded usage), what raises added, and what is left.
 */
import type { BudgetStore, SpendTotals, UsageScope } from "../sessions/store.js";
import { type BudgetPeriod, periodBounds } from "./periods.js";

export type BudgetScope = "global" | keyof UsageScope;

export interface BudgetRule {
  scope: BudgetScope;
  period: BudgetPeriod;
  tokens?: number | undefined;
  cost?: number | undefined;
}

export interface Prices {
  input_per_mtok: number;
  output_per_mtok: number;
}

/** `<scope>:<period>`: one budget per scope and period (the configuration refuses two). */
export function budgetId(rule: BudgetRule): string {
  return `${rule.scope}:${rule.period}`;
}

/**
 * The key `rule` counts the turn under: null for the global budget, undefined when the budget
 * does not apply to this turn (a user budget for a turn nobody started).
 */
export function scopeKeyOf(rule: BudgetRule, scope: UsageScope): string | null | undefined {
  if (rule.scope === "global") return null;
  return scope[rule.scope] ?? undefined;
}

export function costOf(spend: SpendTotals, prices: Prices | undefined): number | null {
  if (!prices) return null;
  return (
    (spend.promptTokens * prices.input_per_mtok + spend.completionTokens * prices.output_per_mtok) /
    1_000_000
  );
}

export interface BudgetStanding {
  rule: BudgetRule;
  id: string;
  key: string | null;
  periodStart: number;
  periodEnd: number;
  spentTokens: number;
  /** Null without model.prices. */
  spentCost: number | null;
  raises: number;
  /** The allowance this period: the budget's own, once more per raise. */
  limitTokens: number | null;
  limitCost: number | null;
  leftTokens: number | null;
  leftCost: number | null;
  /** Nothing is left of the tokens or of the cost: the next model call waits. */
  spent: boolean;
}

export async function standingOf(
  store: BudgetStore,
  rule: BudgetRule,
  key: string | null,
  context: { now: number; timeZone: string; prices: Prices | undefined },
): Promise<BudgetStanding> {
  const { start, end } = periodBounds(context.now, rule.period, context.timeZone);
  const scope = rule.scope === "global" ? null : rule.scope;
  const id = budgetId(rule);
  const [spend, raises] = await Promise.all([
    store.spend({ scope, key, since: start }),
    store.countBudgetRaises(id, key, start),
  ]);
  const spentTokens = spend.promptTokens + spend.completionTokens;
  const spentCost = costOf(spend, context.prices);
  const limitTokens = rule.tokens === undefined ? null : rule.tokens * (1 + raises);
  // A cost budget counts only with prices; without them it never holds a call.
  const limitCost = rule.cost === undefined || spentCost === null ? null : rule.cost * (1 + raises);
  const leftTokens = limitTokens === null ? null : Math.max(0, limitTokens - spentTokens);
  const leftCost = limitCost === null ? null : Math.max(0, limitCost - (spentCost ?? 0));
  return {
    rule,
    id,
    key,
    periodStart: start,
    periodEnd: end,
    spentTokens,
    spentCost,
    raises,
    limitTokens,
    limitCost,
    leftTokens,
    leftCost,
    spent: leftTokens === 0 || leftCost === 0,
  };
}
