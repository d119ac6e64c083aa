/**
 * HTTP requests waiting for the turn that answers their message. A waiter is registered before
 * the message is handed to the runner and bound to its inbox id afterwards, so no event is missed.
 */

import type { RunnerEvent } from "../../contract/platform.js";
import type { InboxAnswer } from "../../sessions/store.js";
import { type Completion, completionOfAnswer } from "./outcomes.js";

/** A tool call the waiter's turn started (for clients that asked to see them). */
export interface ToolStarted {
  id: string;
  name: string;
  arguments: string;
}

export interface Waiter {
  sessionKey: string;
  inboxId: number | null;
  turnId: number | null;
  /** Events that arrived before the inbox id was known. */
  early: RunnerEvent[];
  /** Notices that arrived before the inbox id was known. */
  earlyNotices: string[];
  onDelta: ((text: string) => void) | null;
  /** Text deltas that arrived before a stream was attached. */
  pendingText: string;
  /** The client asked to see tool calls as they start (`X-Keel-Tool-Events`). */
  wantsTools: boolean;
  onTool: ((tool: ToolStarted) => void) | null;
  /** Tool calls started before the stream was attached (kept only when `wantsTools`). */
  pendingTools: ToolStarted[];
  /**
   * The turn stopped at a call that waits for approval (its id): the request waits on for the
   * turn that continues once the approval is answered, and its answer is that turn's.
   */
  awaitingApproval: string | null;
  /** The question, passed on to a stream as it is asked (a request without one ignores it). */
  onQuestion: ((question: { approvalId: string; text: string }) => void) | null;
  /** The latest question asked (the answer when a newer message supersedes it). */
  question: string;
  completion: Promise<Completion>;
  resolve(done: Completion): void;
}

/** How many times a notice's waiter reads the record before giving the notice up. */
const NOTICE_READS = 10;

export class TurnWaiters {
  private readonly waiters = new Set<Waiter>();

  /**
   * @param answerOf how the record says an inbox item was answered: a notice answers a request
   *   only once its message is closed ("Queued" precedes the real reply), and not when a turn
   *   answered it (one of another gateway, whose events never come here).
   */
  constructor(private readonly answerOf: (inboxId: number) => Promise<InboxAnswer>) {}

  add(sessionKey: string, options: { wantsTools?: boolean } = {}): Waiter {
    let resolve!: (done: Completion) => void;
    const completion = new Promise<Completion>((r) => (resolve = r));
    const waiter: Waiter = {
      sessionKey,
      inboxId: null,
      turnId: null,
      early: [],
      earlyNotices: [],
      onDelta: null,
      pendingText: "",
      wantsTools: options.wantsTools === true,
      onTool: null,
      pendingTools: [],
      awaitingApproval: null,
      onQuestion: null,
      question: "",
      completion,
      resolve,
    };
    this.waiters.add(waiter);
    return waiter;
  }

  bind(waiter: Waiter, inboxId: number): void {
    waiter.inboxId = inboxId;
    for (const event of waiter.early.splice(0)) this.apply(waiter, event);
    for (const text of waiter.earlyNotices.splice(0)) void this.settleNotice(waiter, text);
  }

  /** Attaches a stream; text that arrived before it is passed on first. */
  attach(waiter: Waiter, onDelta: (text: string) => void): void {
    waiter.onDelta = onDelta;
    if (waiter.pendingText) onDelta(waiter.pendingText);
    waiter.pendingText = "";
  }

  /** Attaches a listener for the turn's tool calls as they start; earlier ones are passed on first. */
  attachTools(waiter: Waiter, onTool: (tool: ToolStarted) => void): void {
    waiter.onTool = onTool;
    for (const tool of waiter.pendingTools.splice(0)) onTool(tool);
  }

  /** Attaches a listener for approval questions; one asked before it is passed on first. */
  attachQuestions(
    waiter: Waiter,
    onQuestion: (question: { approvalId: string; text: string }) => void,
  ): void {
    waiter.onQuestion = onQuestion;
    if (waiter.awaitingApproval !== null) {
      onQuestion({ approvalId: waiter.awaitingApproval, text: waiter.question });
    }
  }

  remove(waiter: Waiter): void {
    this.waiters.delete(waiter);
  }

  onEvent(event: RunnerEvent): void {
    for (const waiter of this.waiters) {
      if (waiter.sessionKey !== event.sessionKey) continue;
      if (waiter.inboxId === null) waiter.early.push(event);
      else this.apply(waiter, event);
    }
  }

  /** A notice answers a request whose message got no turn (a command, a refusal, no model). */
  onNotice(sessionKey: string, text: string): void {
    for (const waiter of this.waiters) {
      // A notice while an approval is pending is its answer being told, not this request's.
      if (waiter.sessionKey !== sessionKey || waiter.turnId !== null) continue;
      if (waiter.awaitingApproval !== null) continue;
      if (waiter.inboxId === null) waiter.earlyNotices.push(text);
      else void this.settleNotice(waiter, text);
    }
  }

  /**
   * Resolves with the notice unless the waiter's message is still open (queued for a turn), or
   * with the turn's answer when one answered it (the notice came late, e.g. a "Queued" sent only
   * once the database was back, after another gateway had run the message).
   */
  private async settleNotice(waiter: Waiter, text: string): Promise<void> {
    // The record decides; while it cannot be read (the database away) it is asked again, a
    // bounded number of times: the notice may be a "Queued" that precedes the real answer.
    let answer: InboxAnswer | null = null;
    for (let attempt = 0; answer === null && attempt < NOTICE_READS; attempt++) {
      if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 1000));
      answer = await this.answerOf(waiter.inboxId!).catch(() => null);
    }
    if (!answer || answer.state === "open" || waiter.turnId !== null) return;
    const byTurn = answer.state === "answered" && answer.outcome !== "notice";
    waiter.resolve(byTurn ? completionOfAnswer(answer) : { kind: "reply", text });
  }

  /**
   * Settles, from the record, the requests whose message no turn of this gateway has started:
   * with several gateways on one store another one may have run it (it adopted the message while
   * this one could not reach the database), and no event of that turn ever comes here. A message
   * still open, or closed without a record of how (taken into another turn), keeps waiting.
   */
  async settleFromRecord(): Promise<void> {
    const unstarted = [...this.waiters].filter((w) => w.inboxId !== null && w.turnId === null);
    for (const waiter of unstarted) {
      const answer = await this.answerOf(waiter.inboxId!).catch(() => null);
      // A turn of this gateway started meanwhile: its own events answer, with its usage.
      if (answer?.state !== "answered" || waiter.turnId !== null) continue;
      waiter.resolve(completionOfAnswer(answer));
    }
  }

  /** The gateway stops: every waiting request is told its work was cut off. */
  cutOffAll(): void {
    for (const waiter of this.waiters) waiter.resolve({ kind: "cut_off" });
  }

  private apply(waiter: Waiter, event: RunnerEvent): void {
    if (event.type === "refused") {
      if (event.inboxId === waiter.inboxId)
        waiter.resolve({ kind: "refused", refusal: event.refusal });
      return;
    }
    if (event.type === "turn_start" && waiter.awaitingApproval !== null) {
      if (event.inboxId === null && !event.resume) {
        // The turn that applies the answer: this request's answer is now its.
        waiter.turnId = event.turnId;
        waiter.awaitingApproval = null;
      } else if (event.inboxId !== null && event.inboxId !== waiter.inboxId) {
        // A newer message came instead of an answer: the question stays this request's answer.
        waiter.resolve({ kind: "reply", text: waiter.question });
        return;
      }
    }
    if (event.type === "turn_start" && event.inboxId === waiter.inboxId)
      waiter.turnId = event.turnId;
    // A turn that failed before it could start still ends with its inbox id.
    const ownEnd =
      event.type === "turn_end" && event.inboxId !== null && event.inboxId === waiter.inboxId;
    if (waiter.turnId !== event.turnId && !ownEnd) return;
    if (event.type === "text_delta") {
      if (waiter.onDelta) waiter.onDelta(event.text);
      else waiter.pendingText += event.text;
    }
    if (event.type === "tool_start") {
      const tool = { id: event.toolCallId, name: event.name, arguments: event.arguments };
      if (waiter.onTool) waiter.onTool(tool);
      else if (waiter.wantsTools) waiter.pendingTools.push(tool);
    }
    if (event.type === "turn_end") {
      if (event.stopReason === "stop" && event.awaitingApproval) {
        waiter.awaitingApproval = event.awaitingApproval;
        waiter.question = event.reply;
        waiter.turnId = null;
        waiter.onQuestion?.({ approvalId: event.awaitingApproval, text: event.reply });
        return;
      }
      if (event.stopReason === "error") waiter.resolve({ kind: "error", text: event.reply });
      else if (event.stopReason !== "aborted") {
        waiter.resolve({
          kind: "reply",
          text: event.reply,
          ...(event.usage && { usage: event.usage }),
          ...(event.clientToolCalls?.length && { toolCalls: event.clientToolCalls }),
        });
      } else if (event.abortCause === "shutdown") waiter.resolve({ kind: "cut_off" });
      else waiter.resolve({ kind: "interrupted", text: event.reply });
    }
  }
}
