/**
 * What budgets look like from outside: `/usage` lines for a chat, and the report `keel usage`
 * and `GET /api/usage` give (each budget per key, spend per chat and user, pauses waiting).
 */
import { isoTime } from "../lib/wire-time.js";
import type { BudgetPauseRecord, BudgetStore, InboxItem, UsageScope } from "../sessions/store.js";
import { periodBounds } from "./periods.js";
import {
  type BudgetRule,
  type BudgetStanding,
  costOf,
  type Prices,
  scopeKeyOf,
  standingOf,
} from "./rules.js";
import { budgetName, periodEndText, spendText } from "./texts.js";

export interface ReportContext {
  store: BudgetStore;
  rules: readonly BudgetRule[];
  prices: Prices | undefined;
  timeZone: string;
  now: number;
}

/** The scope keys a chat message counts under (for `/usage`: the budgets that apply to it). */
export function scopeOfItem(item: InboxItem): UsageScope {
  return {
    chat: `${item.platform}:${item.chatId}`,
    user: item.senderId !== undefined ? `${item.platform}:${item.senderId}` : null,
    task: null,
    schedule: item.platform === "schedule" ? item.chatId : null,
  };
}

/** `/usage`: each budget that applies to this chat, with what is spent, left, and when it resets. */
export async function usageLines(ctx: ReportContext, item: InboxItem): Promise<string[]> {
  const scope = scopeOfItem(item);
  const lines: string[] = [];
  for (const rule of ctx.rules) {
    const key = scopeKeyOf(rule, scope);
    if (key === undefined) continue;
    const s = await standingOf(ctx.store, rule, key, ctx);
    lines.push(`Budget, ${budgetName(s)}: ${spendText(s)}; ${periodEndText(s, ctx.timeZone)}.`);
  }
  return lines;
}

function standingJson(s: BudgetStanding) {
  return {
    key: s.key,
    spent_tokens: s.spentTokens,
    spent_cost: s.spentCost,
    limit_tokens: s.limitTokens,
    limit_cost: s.limitCost,
    left_tokens: s.leftTokens,
    left_cost: s.leftCost,
    raises: s.raises,
    used_up: s.spent,
    period_start: isoTime(s.periodStart),
    period_end: isoTime(s.periodEnd),
  };
}

export function pauseJson(p: BudgetPauseRecord) {
  return {
    id: p.id,
    state: p.state,
    budget: p.budgetId,
    key: p.scopeKey,
    session_key: p.sessionKey,
    chat: p.address ? `${p.address.platform}:${p.address.chatId}` : null,
    summary: p.summary,
    decided_by: p.decidedBy,
    created_at: isoTime(p.createdAt),
    period_end: isoTime(p.periodEnd),
  };
}

/** Spend per key of `scope` in the current day and month. */
async function spendPer(ctx: ReportContext, scope: "chat" | "user") {
  const day = periodBounds(ctx.now, "day", ctx.timeZone).start;
  const month = periodBounds(ctx.now, "month", ctx.timeZone).start;
  const [today, thisMonth] = await Promise.all([
    ctx.store.spendByKey(scope, day),
    ctx.store.spendByKey(scope, month),
  ]);
  return thisMonth.map((m) => {
    const d = today.find((t) => t.key === m.key);
    const dayTokens = d ? d.promptTokens + d.completionTokens : 0;
    return {
      key: m.key,
      day_tokens: dayTokens,
      day_cost: d ? costOf(d, ctx.prices) : ctx.prices ? 0 : null,
      month_tokens: m.promptTokens + m.completionTokens,
      month_cost: costOf(m, ctx.prices),
    };
  });
}

export type UsageReport = Awaited<ReturnType<typeof usageReport>>;

export async function usageReport(ctx: ReportContext) {
  const budgets = [];
  for (const rule of ctx.rules) {
    let keys: (string | null)[] = [null];
    if (rule.scope !== "global") {
      const since = periodBounds(ctx.now, rule.period, ctx.timeZone).start;
      keys = (await ctx.store.spendByKey(rule.scope, since)).slice(0, 100).map((k) => k.key);
    }
    const standings = [];
    for (const key of keys)
      standings.push(standingJson(await standingOf(ctx.store, rule, key, ctx)));
    budgets.push({
      id: `${rule.scope}:${rule.period}`,
      scope: rule.scope,
      period: rule.period,
      tokens: rule.tokens ?? null,
      cost: rule.cost ?? null,
      standings,
    });
  }
  return {
    time_zone: ctx.timeZone,
    budgets,
    chats: await spendPer(ctx, "chat"),
    users: await spendPer(ctx, "user"),
    pauses: (await ctx.store.listBudgetPauses({ state: "pending" })).map(pauseJson),
  };
}

const num = (value: number) => Math.round(value).toLocaleString("en-US");

/** `keel usage` without --json. */
export function usageReportText(report: UsageReport): string {
  const lines: string[] = [];
  if (report.budgets.length === 0) lines.push("No budgets configured (budgets: in config.yaml).");
  else lines.push(`Budgets (periods in ${report.time_zone}):`);
  for (const b of report.budgets) {
    const limits = [
      b.tokens !== null && `${num(b.tokens)} tokens`,
      b.cost !== null && `cost ${b.cost}`,
    ]
      .filter(Boolean)
      .join(", ");
    lines.push(`  ${b.scope} per ${b.period} (${limits}):`);
    if (b.standings.length === 0) lines.push("    nothing spent this period");
    for (const s of b.standings) {
      const left = [
        s.left_tokens !== null && `${num(s.left_tokens)} tokens left`,
        s.left_cost !== null && `cost ${s.left_cost.toFixed(4)} left`,
      ]
        .filter(Boolean)
        .join(", ");
      const raised = s.raises > 0 ? `, raised ${s.raises}x` : "";
      const flag = s.used_up ? "  USED UP" : "";
      lines.push(
        `    ${s.key ?? "all"}: ${num(s.spent_tokens)} tokens spent, ${left}${raised}; ends ${s.period_end}${flag}`,
      );
    }
  }
  for (const [title, rows] of [
    ["Per chat", report.chats],
    ["Per user", report.users],
  ] as const) {
    lines.push(`${title} (today / this month, tokens):`);
    if (rows.length === 0) lines.push("  none");
    for (const r of rows) {
      const cost =
        r.month_cost !== null
          ? ` (cost ${(r.day_cost ?? 0).toFixed(4)} / ${r.month_cost.toFixed(4)})`
          : "";
      lines.push(`  ${r.key}: ${num(r.day_tokens)} / ${num(r.month_tokens)}${cost}`);
    }
  }
  if (report.pauses.length > 0) {
    lines.push("Paused for a budget (answer: keel approvals approve ID [--raise] | deny ID):");
    for (const p of report.pauses)
      lines.push(`  ${p.id}  ${p.budget} ${p.key ?? ""}  ${p.chat ?? p.session_key}`);
  }
  return lines.join("\n");
}
