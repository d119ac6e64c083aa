/**
 * Approvals: a tool call that needs a human is journaled `awaiting_approval` with its question
 * before anything runs, and the turn ends there (it holds no concurrency slot while it waits).
 * An answer — a button, `/approve`, the HTTP API or the CLI, or the timeout — is committed once
 * by the store, and then a turn continues the session: the gate of that turn sees the decision
 * and runs the call (approved) or hands the model a "not run" result (denied). Everything is in
 * the record, so a restart changes nothing: pending questions are asked again, decisions not yet
 * applied are applied, deadlines that passed meanwhile deny.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import type { ToolGate } from "../agent/types.js";
import type { ApprovalPress, ApprovalPressResult, ChatAddress } from "../contract/platform.js";
import { PeriodicCheck } from "../lib/periodic-check.js";
import type { GateTurn, TurnApprovals } from "../runner/agent-run.js";
import type {
  ApprovalDecision,
  ApprovalRecord,
  ApprovalStore,
  InboxItem,
  TurnStore,
} from "../sessions/store.js";
import { type ApprovalPolicy, approvalNeed } from "./policy.js";
import type { ShellParser } from "./shell-syntax.js";
import {
  decidedText,
  NOT_YOURS,
  NOTHING_WAITING,
  notRunResult,
  questionText,
  reaskText,
  UNKNOWN_APPROVAL,
} from "./texts.js";

export interface ApprovalsOptions {
  store: ApprovalStore & TurnStore;
  policy: ApprovalPolicy;
  timeoutMs: number;
  /** Queues a message to a chat through the outbox; `approvalId` makes it a card with buttons. */
  notify(address: ChatAddress, text: string, approvalId?: string): Promise<void>;
  /** Shows the answer on the card, where the platform keeps one (Telegram edits it). */
  updateCard?(address: ChatAddress, approvalId: string, text: string): Promise<void>;
  /** Queues the turn that applies a decision in this session (the runner). */
  continueSession(
    sessionKey: string,
    sessionId: string,
    requester: string | null,
    asker: string | null,
  ): void;
  /**
   * Loads the shell grammar; called once, at the first tool call a gate checks (a gateway that
   * runs no command never pays for it). Should it fail, every terminal command asks (fail
   * closed) and the error is logged once.
   */
  loadShell(): Promise<ShellParser>;
  logger: Logger;
  now?: () => number;
  /** How often deadlines are checked. */
  checkIntervalMs?: number;
}

/** Who answers: `<platform>:<user id>` (or `operator` for control-token holders). */
export interface Decider {
  id: string;
  /** A name to show on the card. */
  label: string;
  operator: boolean;
  /** The chat the answer came from, when it came from a chat: must be the asked chat. */
  chatId?: string;
}

/** What answering a question (an approval, a budget pause) came to. */
export type AnswerOutcome<R> =
  | { status: "decided"; record: R }
  | { status: "already"; record: R }
  | { status: "forbidden"; record: R }
  | { status: "unknown" };

export type DecideOutcome = AnswerOutcome<ApprovalRecord>;

const OPERATOR: Decider = { id: "operator", label: "an operator", operator: true };

export class Approvals implements TurnApprovals {
  private readonly now: () => number;
  private readonly deadlines: PeriodicCheck;
  private shellLoad: Promise<ShellParser | null> | null = null;

  constructor(private readonly options: ApprovalsOptions) {
    this.now = options.now ?? Date.now;
    this.deadlines = new PeriodicCheck(
      () => this.denyOverdue(),
      (err) => this.options.logger.error({ err }, "checking approval deadlines failed"),
    );
  }

  gateFor(turn: GateTurn): ToolGate {
    return {
      check: async (call, tool) => {
        const { store } = this.options;
        const earlier = await store.findApprovalForCall(turn.sessionId, call.id);
        if (earlier) {
          // Asked before (a continued or resumed turn): never asked twice.
          if (earlier.state === "pending") {
            return { kind: "wait", approvalId: earlier.id, question: null };
          }
          if (earlier.state === "approved") return { kind: "run" };
          return { kind: "skip", output: notRunResult(earlier, this.options.timeoutMs) };
        }
        const need = approvalNeed(this.options.policy, call, tool, await this.shell());
        if (!need) return { kind: "run" };
        // Granted "for the session" to this person or credential only: anyone else asks again.
        const granted =
          turn.asker !== null &&
          (await store.hasApprovalGrants(turn.sessionId, turn.asker, need.grants));
        if (granted) return { kind: "run" };
        const record = await store.requestApproval({
          id: newApprovalId(),
          sessionKey: turn.sessionKey,
          sessionId: turn.sessionId,
          turnId: turn.turnId,
          toolCallId: call.id,
          toolName: call.function.name,
          arguments: call.function.arguments,
          summary: need.summary,
          rule: need.rule,
          reason: need.reason,
          address: turn.address,
          requester: turn.requester,
          asker: turn.asker,
          grants: need.grants,
          deadlineAt: this.now() + this.options.timeoutMs,
        });
        this.options.logger.info(
          { approval: record.id, session: turn.sessionKey, rule: need.rule },
          "tool call awaiting approval",
        );
        return {
          kind: "wait",
          approvalId: record.id,
          question: questionText(record, this.options.timeoutMs),
        };
      },
    };
  }

  async supersede(turn: GateTurn): Promise<void> {
    const { store } = this.options;
    const pending = await store.listApprovals({ state: "pending", sessionId: turn.sessionId });
    for (const approval of pending) {
      const decided = await store.decideApproval({
        id: approval.id,
        decision: "superseded",
        decidedBy: null,
      });
      if (!decided?.changed) continue;
      await this.showOnCard(decided.record);
      // The call's "not run" result is journaled in the new turn (after the new message; the
      // history puts results back beside their call).
      const journal = {
        toolCallId: approval.toolCallId,
        turnId: turn.turnId,
        sessionId: turn.sessionId,
      };
      await store.recordToolStart({ ...journal, name: approval.toolName, arguments: "{}" });
      await store.recordToolFinish({
        ...journal,
        result: notRunResult(decided.record, this.options.timeoutMs),
      });
    }
  }

  /**
   * Answers an approval once. Only its requester or an operator may; from a chat, only in the
   * chat that was asked. A decision now queues the turn that applies it; `announce` also tells
   * the chat (for answers from outside it: HTTP, CLI).
   */
  async decide(
    id: string,
    decision: Exclude<ApprovalDecision, "timeout" | "superseded">,
    by: Decider,
    announce = false,
    cardUpdated = false,
  ): Promise<DecideOutcome> {
    const { store } = this.options;
    const record = await store.getApproval(id);
    if (!record) return { status: "unknown" };
    if (record.state !== "pending") return { status: "already", record };
    const sameChat = by.chatId === undefined || by.chatId === record.address?.chatId;
    if (!sameChat || !(by.operator || (record.requester !== null && by.id === record.requester))) {
      return { status: "forbidden", record };
    }
    const decided = await store.decideApproval({ id, decision, decidedBy: by.label });
    if (!decided) return { status: "unknown" };
    if (!decided.changed) return { status: "already", record: decided.record };
    this.options.logger.info({ approval: id, decision, by: by.id }, "approval answered");
    if (announce && decided.record.address) {
      await this.options.notify(decided.record.address, decidedText(decided.record));
    }
    if (!cardUpdated) await this.showOnCard(decided.record);
    this.apply(decided.record);
    return { status: "decided", record: decided.record };
  }

  /**
   * An answer from outside the chats (control API, `keel approvals`): an operator's, and the
   * chat that was asked is told who decided.
   */
  async decideAsOperator(
    id: string,
    decision: Exclude<ApprovalDecision, "timeout" | "superseded">,
  ): Promise<{ status: "decided" | "already" | "unknown"; record?: ApprovalRecord }> {
    const outcome = await this.decide(id, decision, OPERATOR, true);
    if (outcome.status === "unknown") return outcome;
    return { status: outcome.status === "decided" ? "decided" : "already", record: outcome.record };
  }

  /** A button press (Telegram): the toast for the presser and the card's new text. */
  async press(press: ApprovalPress): Promise<ApprovalPressResult> {
    // The platform edits the pressed card itself, with the text returned here.
    const outcome = await this.decide(
      press.approvalId,
      press.decision,
      presserOf(press),
      false,
      true,
    );
    return pressResult(outcome, decidedText, {
      forbidden: NOT_YOURS,
      unknown: UNKNOWN_APPROVAL(press.approvalId),
    });
  }

  /** `/approve [id] [session]` and `/deny [id]` in a chat; answers with what happened. */
  async chatCommand(item: InboxItem, args: string, verb: "approve" | "deny"): Promise<string> {
    const words = args.split(/\s+/).filter(Boolean);
    const forSession = verb === "approve" && words.includes("session");
    let id = words.find((w) => w !== "session");
    if (!id) {
      let here = await this.options.store.listApprovals({
        state: "pending",
        sessionKey: item.sessionKey,
      });
      // A task's child asks in the chat its task reports to, from a session of its own.
      if (here.length === 0) {
        here = (await this.options.store.listApprovals({ state: "pending" })).filter(
          (a) => a.address?.platform === item.address.platform && a.address.chatId === item.chatId,
        );
      }
      if (here.length === 0) return NOTHING_WAITING;
      if (here.length > 1) {
        return `Several approvals wait here: ${here.map((a) => a.id).join(", ")}. Name one: /${verb} ID`;
      }
      id = here[0]!.id;
    }
    const decision = verb === "deny" ? "deny" : forSession ? "approve_session" : "approve";
    const outcome = await this.decide(id, decision, {
      id: `${item.platform}:${item.senderId ?? ""}`,
      label: item.senderName ?? item.senderId ?? item.platform,
      operator: item.operator === true,
      chatId: item.chatId,
    });
    switch (outcome.status) {
      case "decided":
        return decidedText(outcome.record);
      case "already":
        return `Already answered: ${decidedText(outcome.record)}`;
      case "forbidden":
        return NOT_YOURS;
      case "unknown":
        return UNKNOWN_APPROVAL(id);
    }
  }

  /**
   * After a (re)start: asks pending questions again, applies decisions a crash left unapplied,
   * and starts checking deadlines.
   */
  async start(): Promise<void> {
    const { store } = this.options;
    await this.expireDue();
    for (const record of await store.listApprovals({ state: "pending" })) {
      if (record.address) {
        await this.options.notify(
          record.address,
          reaskText(record, this.remainingMs(record)),
          record.id,
        );
      }
    }
    for (const record of await store.listUnappliedDecisions()) this.apply(record);
    this.deadlines.start(this.options.checkIntervalMs ?? 1000);
  }

  stop(): void {
    this.deadlines.stop();
  }

  /** Denies every approval whose deadline passed, tells its chat, and continues its turn. */
  expireDue(): Promise<void> {
    return this.deadlines.run();
  }

  private async denyOverdue(): Promise<void> {
    const due = await this.options.store.listApprovals({ dueBy: this.now() });
    for (const record of due) {
      const decided = await this.options.store.decideApproval({
        id: record.id,
        decision: "timeout",
        decidedBy: null,
      });
      if (!decided?.changed) continue;
      this.options.logger.info({ approval: record.id }, "approval timed out");
      if (decided.record.address) {
        await this.options.notify(decided.record.address, decidedText(decided.record));
      }
      await this.showOnCard(decided.record);
      this.apply(decided.record);
    }
  }

  private async showOnCard(record: ApprovalRecord): Promise<void> {
    if (!record.address || !this.options.updateCard) return;
    await this.options
      .updateCard(record.address, record.id, decidedText(record))
      .catch((err: unknown) =>
        this.options.logger.warn({ err, approval: record.id }, "card not updated"),
      );
  }

  private apply(record: ApprovalRecord): void {
    this.options.continueSession(
      record.sessionKey,
      record.sessionId,
      record.requester,
      record.asker,
    );
  }

  /**
   * The loaded grammar, or null when it could not be loaded: this command then asks (fail
   * closed), and the next one tries the load again.
   */
  private shell(): Promise<ShellParser | null> {
    this.shellLoad ??= this.options.loadShell().catch((err: unknown) => {
      this.shellLoad = null;
      this.options.logger.error(
        { err },
        "the shell grammar did not load: this terminal command asks for approval",
      );
      return null;
    });
    return this.shellLoad;
  }

  private remainingMs(record: ApprovalRecord): number {
    return Math.max(0, record.deadlineAt - this.now());
  }
}

/** Who pressed a card's button, as the one who answers. */
export function presserOf(press: ApprovalPress): Decider {
  return {
    id: `${press.platform}:${press.userId}`,
    label: press.userName ?? press.userId,
    operator: press.operator,
    chatId: press.chatId,
  };
}

/** The toast for the presser and the card's new text, from what the answer came to. */
export function pressResult<R>(
  outcome: AnswerOutcome<R>,
  text: (record: R) => string,
  refused: { forbidden: string; unknown: string },
): ApprovalPressResult {
  switch (outcome.status) {
    case "decided":
      return { toast: text(outcome.record).split("\n")[0]!, cardText: text(outcome.record) };
    case "already":
      return { toast: "Already answered.", cardText: text(outcome.record) };
    case "forbidden":
      return { toast: refused.forbidden, cardText: null };
    case "unknown":
      return { toast: refused.unknown, cardText: null };
  }
}

/** 10 hex digits: `approve_session:` + id stays far below Telegram's 64-byte callback limit. */
function newApprovalId(): string {
  return randomBytes(5).toString("hex");
}
