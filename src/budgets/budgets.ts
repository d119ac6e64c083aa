/**
 * Budgets: before each model call, every budget that applies to the turn (global, its chat, its
 * user, its task or schedule) is read from the recorded usage of its current period. When one is
 * used up, the call does not start: a pause is recorded (`budget_pauses`), the chat is told which
 * budget and how much is left, and the turn ends there holding no slot, its message kept in the
 * transcript. An operator answers like an approval — once, raise for the period, deny — and a
 * turn continues the session: it goes on (once, raised) or ends with a clear message (denied).
 * Everything is in the record: after a restart pending pauses are asked again and answers not
 * yet acted on are applied; a pause nobody answers before its period ends is checked again then.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { ModelCallGate, ModelCallVerdict } from "../agent/types.js";
import {
  type AnswerOutcome,
  type Decider,
  presserOf,
  pressResult,
} from "../approvals/approvals.js";
import type { ApprovalPress, ApprovalPressResult, ChatAddress } from "../contract/platform.js";
import { PeriodicCheck } from "../lib/periodic-check.js";
import type { GateTurn, TurnBudgets } from "../runner/agent-run.js";
import type {
  BudgetDecision,
  BudgetPauseRecord,
  BudgetStore,
  UsageScope,
} from "../sessions/store.js";
import { localTimeZone } from "./local-zone.js";
import {
  type BudgetRule,
  type BudgetStanding,
  type Prices,
  scopeKeyOf,
  standingOf,
} from "./rules.js";
import {
  deniedReply,
  OPERATORS_ONLY,
  pauseDecidedText,
  pauseQuestion,
  stillPausedText,
} from "./texts.js";

/** Budget pause ids start so: an answer (button, `/approve`, HTTP, CLI) is routed by its id. */
export const BUDGET_PAUSE_PREFIX = "b-";

export function isBudgetPauseId(id: string): boolean {
  return id.startsWith(BUDGET_PAUSE_PREFIX);
}

export interface BudgetsOptions {
  store: BudgetStore;
  rules: readonly BudgetRule[];
  prices: Prices | undefined;
  /**
   * The gateway's time zone: periods are its calendar days and months. Default: the process's
   * (TZ, else the machine's), read when first needed, since the first Intl call loads ICU's
   * data (some 10 ms of a start that configured no budget).
   */
  timeZone?: string;
  /** Queues a message to a chat; `pauseId` makes it a card with answer buttons. */
  notify(address: ChatAddress, text: string, pauseId?: string): Promise<void>;
  /** Shows the answer on the card, where the platform keeps one. */
  updateCard?(address: ChatAddress, pauseId: string, text: string): Promise<void>;
  /** Queues the turn that acts on an answer in this session (the runner). */
  continueSession(sessionKey: string, sessionId: string, requester: string | null): void;
  logger: Logger;
  now?: () => number;
  /** How often pauses whose period ended are looked for. */
  checkIntervalMs?: number;
}

export type BudgetAnswer = Exclude<BudgetDecision, "expire">;

export type BudgetDecideOutcome = AnswerOutcome<BudgetPauseRecord>;

export class Budgets implements TurnBudgets {
  private readonly now: () => number;
  private readonly periodEnds: PeriodicCheck;
  private zone: string | undefined;

  constructor(private readonly options: BudgetsOptions) {
    this.now = options.now ?? Date.now;
    this.periodEnds = new PeriodicCheck(
      async () => {
        const due = await this.options.store.listBudgetPauses({ dueBy: this.now() });
        for (const pause of due) await this.expire(pause);
      },
      (err) => this.options.logger.error({ err }, "checking budget periods failed"),
    );
  }

  get timeZone(): string {
    this.zone ??= this.options.timeZone ?? localTimeZone();
    return this.zone;
  }

  gateFor(turn: GateTurn, scope: UsageScope): ModelCallGate {
    // "Approve once" (and a raise) lets the rest of this turn go on; the next turn is checked again.
    let allowed = false;
    return {
      check: async () => {
        if (allowed || this.options.rules.length === 0) return { kind: "go" };
        const verdict = await this.answered(turn);
        if (verdict === "allowed") {
          allowed = true;
          return { kind: "go" };
        }
        if (verdict) return verdict;
        return this.checkBudgets(turn, scope);
      },
    };
  }

  /**
   * What answers of this transcript say before the budgets are read: a pause still waiting holds
   * the call; an answer no turn has acted on yet is acted on now (once: allowed; denied: the
   * turn ends). Null: read the budgets (nothing waits, or the answer raised the budget).
   */
  private async answered(turn: GateTurn): Promise<ModelCallVerdict | "allowed" | null> {
    const { store } = this.options;
    let pauses = await store.listBudgetPauses({ sessionId: turn.sessionId });
    const waiting = pauses.find((p) => p.state === "pending");
    if (waiting && waiting.periodEnd > this.now()) {
      return { kind: "wait", pauseId: waiting.id, question: stillPausedText(waiting) };
    }
    if (waiting) {
      // Its period ended before the deadline check saw it: the budget starts afresh now.
      await this.expire(waiting);
      pauses = await store.listBudgetPauses({ sessionId: turn.sessionId });
    }
    let result: ModelCallVerdict | "allowed" | null = null;
    // Oldest first: the latest answer decides.
    for (const pause of pauses.filter((p) => !p.applied).reverse()) {
      await store.markBudgetPauseApplied(pause.id);
      if (pause.state === "denied") result = { kind: "stop", reply: deniedReply(pause) };
      // A raise counts in every later reading of the budget, and lets this turn go on.
      else if (pause.state === "approved" || pause.state === "raised") result = "allowed";
      else result = null;
    }
    return result;
  }

  private async checkBudgets(turn: GateTurn, scope: UsageScope): Promise<ModelCallVerdict> {
    for (const rule of this.options.rules) {
      const key = scopeKeyOf(rule, scope);
      if (key === undefined) continue;
      const standing = await this.standing(rule, key);
      if (!standing.spent) continue;
      const pause = await this.pause(turn, standing);
      return { kind: "wait", pauseId: pause.id, question: pause.summary };
    }
    return { kind: "go" };
  }

  standing(rule: BudgetRule, key: string | null): Promise<BudgetStanding> {
    const { store, prices } = this.options;
    return standingOf(store, rule, key, { now: this.now(), timeZone: this.timeZone, prices });
  }

  private async pause(turn: GateTurn, standing: BudgetStanding): Promise<BudgetPauseRecord> {
    const id = `${BUDGET_PAUSE_PREFIX}${randomBytes(5).toString("hex")}`;
    const record = await this.options.store.requestBudgetPause({
      id,
      sessionKey: turn.sessionKey,
      sessionId: turn.sessionId,
      turnId: turn.turnId,
      budgetId: standing.id,
      scopeKey: standing.key,
      periodStart: standing.periodStart,
      periodEnd: standing.periodEnd,
      summary: pauseQuestion(standing, id, this.timeZone),
      address: turn.address,
      requester: turn.requester,
    });
    this.options.logger.info(
      { pause: id, session: turn.sessionKey, budget: standing.id, key: standing.key },
      "model call paused: budget used up",
    );
    return record;
  }

  /**
   * Answers a pause once. Only operators may (a sender cannot lift their own cap); from a chat,
   * only in the chat that was asked. `announce` also tells the chat (answers from outside it).
   */
  async decide(
    id: string,
    decision: BudgetAnswer,
    by: Decider,
    announce = false,
    cardUpdated = false,
  ): Promise<BudgetDecideOutcome> {
    const { store } = this.options;
    const record = await store.getBudgetPause(id);
    if (!record) return { status: "unknown" };
    if (record.state !== "pending") return { status: "already", record };
    const sameChat = by.chatId === undefined || by.chatId === record.address?.chatId;
    if (!by.operator || !sameChat) return { status: "forbidden", record };
    const decided = await store.decideBudgetPause({ id, decision, decidedBy: by.label });
    if (!decided) return { status: "unknown" };
    if (!decided.changed) return { status: "already", record: decided.record };
    this.options.logger.info({ pause: id, decision, by: by.id }, "budget pause answered");
    await this.settled(decided.record, announce, !cardUpdated);
    return { status: "decided", record: decided.record };
  }

  /** An answer from outside the chats (control API, CLI): an operator's. */
  async decideAsOperator(id: string, decision: BudgetAnswer): Promise<BudgetDecideOutcome> {
    return this.decide(
      id,
      decision,
      { id: "operator", label: "an operator", operator: true },
      true,
    );
  }

  /** A card's button: the middle one (`approve_session`) raises the budget. */
  async press(press: ApprovalPress): Promise<ApprovalPressResult> {
    const decision: BudgetAnswer =
      press.decision === "deny" ? "deny" : press.decision === "approve" ? "approve" : "raise";
    const outcome = await this.decide(press.approvalId, decision, presserOf(press), false, true);
    return pressResult(outcome, pauseDecidedText, {
      forbidden: OPERATORS_ONLY,
      unknown: `No budget pause ${press.approvalId}.`,
    });
  }

  /** The text a chat answer (`/approve ID [raise]`, `/deny ID`) gets. */
  describe(outcome: BudgetDecideOutcome, id: string): string {
    switch (outcome.status) {
      case "decided":
        return pauseDecidedText(outcome.record);
      case "already":
        return `Already answered: ${pauseDecidedText(outcome.record)}`;
      case "forbidden":
        return OPERATORS_ONLY;
      case "unknown":
        return `No budget pause ${id}.`;
    }
  }

  /** After a (re)start: pending pauses are asked again, unapplied answers applied. */
  async start(): Promise<void> {
    const { store } = this.options;
    await this.expireDue();
    for (const record of await store.listBudgetPauses({ state: "pending" })) {
      if (record.address) await this.options.notify(record.address, record.summary, record.id);
    }
    for (const record of await store.listBudgetPauses({ unapplied: true })) this.apply(record);
    this.periodEnds.start(this.options.checkIntervalMs ?? 5000);
  }

  stop(): void {
    this.periodEnds.stop();
  }

  /** Pauses whose period ended unanswered: the budget starts afresh, so the turn is checked again. */
  expireDue(): Promise<void> {
    return this.periodEnds.run();
  }

  private async expire(due: BudgetPauseRecord): Promise<void> {
    const decided = await this.options.store.decideBudgetPause({
      id: due.id,
      decision: "expire",
      decidedBy: null,
    });
    if (decided?.changed) await this.settled(decided.record, true, true);
  }

  private async settled(record: BudgetPauseRecord, announce: boolean, card: boolean) {
    const text = pauseDecidedText(record);
    if (announce && record.address) await this.options.notify(record.address, text);
    if (card && record.address && this.options.updateCard) {
      await this.options
        .updateCard(record.address, record.id, text)
        .catch((err: unknown) =>
          this.options.logger.warn({ err, pause: record.id }, "card not updated"),
        );
    }
    this.apply(record);
  }

  private apply(record: BudgetPauseRecord): void {
    this.options.continueSession(record.sessionKey, record.sessionId, record.requester);
  }
}
