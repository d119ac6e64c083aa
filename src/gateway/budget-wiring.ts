/**
 * Budgets and per-sender limits, wired: the pauses' questions and answers go out as notices and
 * cards, answers arrive through the approval channels (buttons, `/approve`, `/deny`, the control
 * API, `keel approvals`) routed by the pause id, and `/usage` shows the budgets of its chat.
 */
import type { Logger } from "pino";
import type { Approvals } from "../approvals/approvals.js";
import { Budgets, isBudgetPauseId } from "../budgets/budgets.js";
import { usageLines, usageReport } from "../budgets/report.js";
import { SenderLimits } from "../budgets/sender-limits.js";
import type { Config } from "../config/schema.js";
import type { ApprovalPress, ApprovalPressResult, ChatAddress } from "../contract/platform.js";
import type { PlatformRegistry } from "../contract/registry.js";
import { type BudgetDesk, createBudgetRoutes } from "../control/budget-routes.js";
import type { ExtraChatCommand } from "../runner/runner.js";
import type { InboxItem, Store } from "../sessions/store.js";

export interface BudgetParts {
  budgets: Budgets;
  /** Null when no limit is configured. */
  senderLimits: SenderLimits | null;
}

export function createBudgetParts(
  input: { config: Config; logger: Logger; store: Store; now: () => number },
  parts: {
    sendNotice(address: ChatAddress, text: string, pauseId?: string): Promise<void>;
    platforms: PlatformRegistry;
    continueSession(sessionKey: string, sessionId: string, requester: string | null): void;
  },
): BudgetParts {
  const { config, logger, store, now } = input;
  const budgets = new Budgets({
    store,
    rules: config.budgets,
    prices: config.model.prices,
    notify: (address, text, pauseId) => parts.sendNotice(address, text, pauseId),
    updateCard: (address, pauseId, text) =>
      parts.platforms.approvalAnswered(address, pauseId, text),
    continueSession: parts.continueSession,
    logger: logger.child({ component: "budgets" }),
    now,
  });
  if (config.budgets.some((b) => b.cost !== undefined) && !config.model.prices) {
    logger.warn("budgets with a cost need model.prices: their cost is not counted");
  }
  const { per_user, per_chat, exempt_operators } = config.limits;
  const senderLimits =
    per_user || per_chat
      ? new SenderLimits({
          perUser: per_user,
          perChat: per_chat,
          exemptOperators: exempt_operators,
          notify: (item, text) => {
            parts.sendNotice(item.address, text).catch((err: unknown) => {
              logger.warn({ err, inboxId: item.id }, "queued notice not sent");
            });
          },
          // Real time: the windows are timers, not a test's clock.
          now: Date.now,
        })
      : null;
  return { budgets, senderLimits };
}

/** The approvals the runner sees: a pause's card buttons go to budgets, others to approvals. */
export function routedApprovals(approvals: Approvals, budgets: Budgets) {
  return {
    gateFor: approvals.gateFor.bind(approvals),
    supersede: approvals.supersede.bind(approvals),
    press(press: ApprovalPress): Promise<ApprovalPressResult> {
      return isBudgetPauseId(press.approvalId) ? budgets.press(press) : approvals.press(press);
    },
  };
}

/**
 * `/approve [id] [raise]` and `/deny [id]`: a pause id, or no id while only budget pauses wait
 * in this chat, goes to budgets; anything else to approvals.
 */
export function answerCommands(
  approvals: Approvals,
  budgets: Budgets,
  store: Store,
): Record<"approve" | "deny", ExtraChatCommand> {
  const answer = async (item: InboxItem, args: string, verb: "approve" | "deny") => {
    const words = args.split(/\s+/).filter(Boolean);
    let id = words.find((w) => w !== "raise" && w !== "session");
    if (!id) {
      const waiting = await store.listBudgetPauses({
        state: "pending",
        sessionKey: item.sessionKey,
      });
      const tools = await store.listApprovals({ state: "pending", sessionKey: item.sessionKey });
      if (waiting.length === 1 && tools.length === 0) id = waiting[0]!.id;
    }
    if (!id || !isBudgetPauseId(id)) return approvals.chatCommand(item, args, verb);
    const decision = verb === "deny" ? "deny" : words.includes("raise") ? "raise" : "approve";
    const outcome = await budgets.decide(id, decision, {
      id: `${item.platform}:${item.senderId ?? ""}`,
      label: item.senderName ?? item.senderId ?? item.platform,
      operator: item.operator === true,
      chatId: item.chatId,
    });
    return budgets.describe(outcome, id);
  };
  return {
    approve: (item, args) => answer(item, args, "approve"),
    deny: (item, args) => answer(item, args, "deny"),
  };
}

/** `/usage` with the budgets that apply to the chat. */
export function usageWithBudgets(
  usage: ExtraChatCommand,
  input: { config: Config; store: Store; now: () => number },
  budgets: Budgets,
): ExtraChatCommand {
  return async (item, args) => {
    const base = await usage(item, args);
    const lines = await usageLines(reportContext(input, budgets), item);
    return [base, ...lines].join("\n");
  };
}

function reportContext(
  input: { config: Config; store: Store; now: () => number },
  budgets: Budgets,
) {
  return {
    store: input.store,
    rules: input.config.budgets,
    prices: input.config.model.prices,
    timeZone: budgets.timeZone,
    now: input.now(),
  };
}

export function budgetRoutes(
  input: { config: Config; store: Store; now: () => number },
  budgets: Budgets,
) {
  const desk: BudgetDesk = {
    isPauseId: isBudgetPauseId,
    report: () => usageReport(reportContext(input, budgets)),
    decide: async (id, decision) => budgets.decideAsOperator(id, decision),
  };
  return createBudgetRoutes(desk);
}
