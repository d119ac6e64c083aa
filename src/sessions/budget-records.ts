/** The records of budgets (src/budgets): spend queries and the pauses a used-up budget makes. */
import type { ChatAddress } from "../contract/platform.js";

/** The keys a model call's spend counts under, each null when it does not apply or is unknown. */
export interface UsageScope {
  /** `<platform>:<chat id>` of the chat the turn answers. */
  chat: string | null;
  /** `<platform>:<user id>` of who started the turn. */
  user: string | null;
  /** The background task the turn runs for. */
  task: string | null;
  /** The scheduled job the turn runs for. */
  schedule: string | null;
}

/** The scope a spend query narrows to: one key of one kind, or (null) every call. */
export type SpendScope = keyof UsageScope;

export interface SpendQuery {
  scope: SpendScope | null;
  /** The key within `scope` (ignored when `scope` is null). */
  key: string | null;
  /** Calls recorded at or after this time. */
  since: number;
}

/** Tokens spent by the model calls a query matched. */
export interface SpendTotals {
  calls: number;
  promptTokens: number;
  completionTokens: number;
}

/** A budget pause: a model call held because a budget is spent, until an operator answers. */
export interface BudgetPauseInput {
  id: string;
  sessionKey: string;
  sessionId: string;
  turnId: number | null;
  /** `<scope>:<period>` of the budget that is spent. */
  budgetId: string;
  /** The key the budget was counted under (null for the global budget). */
  scopeKey: string | null;
  periodStart: number;
  periodEnd: number;
  /** Which budget and how much is left, as the chat was told. */
  summary: string;
  address: ChatAddress | null;
  requester: string | null;
}

/**
 * `approved`: once (the waiting turn goes on); `raised`: the budget gets its own amount again
 * for the rest of the period; `denied`: the turn ends; `expired`: the period ended unanswered
 * (the budget starts afresh, the turn is checked again).
 */
export type BudgetPauseState = "pending" | "approved" | "raised" | "denied" | "expired";
export type BudgetDecision = "approve" | "raise" | "deny" | "expire";

export interface BudgetPauseRecord extends BudgetPauseInput {
  state: BudgetPauseState;
  decidedBy: string | null;
  decidedAt: number | null;
  /** A turn has acted on the decision. */
  applied: boolean;
  createdAt: number;
}

export interface BudgetPauseFilter {
  state?: BudgetPauseState;
  sessionId?: string;
  sessionKey?: string;
  /** Pending pauses whose period ended by then. */
  dueBy?: number;
  /** Decided pauses no turn acted on yet, in transcripts their session still uses. */
  unapplied?: boolean;
}
