/** What budgets say in chats, on cards and in reports. */
import type { BudgetPauseRecord } from "../sessions/store.js";
import { localTimeText } from "./periods.js";
import type { BudgetStanding } from "./rules.js";

const n = (value: number) => Math.round(value).toLocaleString("en-US");
const money = (value: number) => value.toFixed(4);

/** `chat budget per day (telegram:42)`: which budget, for whom. */
export function budgetName(standing: Pick<BudgetStanding, "rule" | "key">): string {
  const who = standing.key === null ? "" : ` (${standing.key})`;
  return `${standing.rule.scope} budget per ${standing.rule.period}${who}`;
}

/** `1,200 of 1,000 tokens spent, 0 left; cost 0.0012 of 0.5000, 0.4988 left`. */
export function spendText(s: BudgetStanding): string {
  const parts: string[] = [];
  if (s.limitTokens !== null) {
    parts.push(
      `${n(s.spentTokens)} of ${n(s.limitTokens)} tokens spent, ${n(s.leftTokens ?? 0)} left`,
    );
  }
  if (s.limitCost !== null && s.spentCost !== null) {
    parts.push(
      `cost ${money(s.spentCost)} of ${money(s.limitCost)} spent, ${money(s.leftCost ?? 0)} left`,
    );
  }
  if (parts.length === 0) parts.push(`${n(s.spentTokens)} tokens spent`);
  return parts.join("; ");
}

export function periodEndText(s: BudgetStanding, timeZone: string): string {
  return `resets ${localTimeText(s.periodEnd, timeZone)} (${timeZone})`;
}

/** The question a pause asks in the chat (and on the card, with buttons where there are any). */
export function pauseQuestion(s: BudgetStanding, id: string, timeZone: string): string {
  return (
    `⏸ Paused: the ${budgetName(s)} is used up (${spendText(s)}; ${periodEndText(s, timeZone)}). ` +
    "Your message is kept and this turn goes on once an operator allows it.\n" +
    `Operators: /approve ${id} (once), /approve ${id} raise (raise the budget for this ${s.rule.period}), ` +
    `/deny ${id}.`
  );
}

/** A new message while the session waits for an answer to its pause. */
export function stillPausedText(pause: BudgetPauseRecord): string {
  return (
    "⏸ Still paused for a budget: your message is kept and will be answered once an operator " +
    `allows it (/approve ${pause.id}, /deny ${pause.id}).\n${pause.summary.split("\n")[0]}`
  );
}

/** How an answered pause reads on its card and in the chat. */
export function pauseDecidedText(pause: BudgetPauseRecord): string {
  const by = pause.decidedBy ? ` by ${pause.decidedBy}` : "";
  switch (pause.state) {
    case "approved":
      return `✅ Budget pause ${pause.id}: allowed once${by}; the turn goes on.`;
    case "raised":
      return `⬆ Budget pause ${pause.id}: budget raised for the period${by}; the turn goes on.`;
    case "denied":
      return `🚫 Budget pause ${pause.id}: denied${by}; the turn ends.`;
    case "expired":
      return `🔄 Budget pause ${pause.id}: the budget's period ended; the turn is checked again.`;
    default:
      return `⏸ Budget pause ${pause.id}: waiting for an operator.`;
  }
}

/** The turn's last word after a deny. */
export function deniedReply(pause: BudgetPauseRecord): string {
  const by = pause.decidedBy ? ` by ${pause.decidedBy}` : "";
  return (
    `🚫 Stopped: going over the budget was denied${by}, so this turn ends without an answer ` +
    "(the conversation is kept). Ask again once the budget resets or is raised."
  );
}

export const OPERATORS_ONLY = "Only an operator may answer a budget pause.";
