/**
 * HTTP requests waiting for the turn that answers their message. A waiter is registered before
 * the message is handed to the runner and bound to its inbox id afterwards, so no event is missed.
 */
import type { RunnerEvent } from "../../runner/events.js";

export type Completion = { kind: "reply" | "error" | "interrupted"; text: string };

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
  completion: Promise<Completion>;
  resolve(done: Completion): void;
}

export class TurnWaiters {
  private readonly waiters = new Set<Waiter>();

  /**
   * @param isInboxOpen whether an inbox item is still pending or running: a notice answers a
   *   request only once its message is closed ("Queued" precedes the real reply).
   */
  constructor(private readonly isInboxOpen: (inboxId: number) => Promise<boolean>) {}

  add(sessionKey: string): Waiter {
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
      if (waiter.sessionKey !== sessionKey || waiter.turnId !== null) continue;
      if (waiter.inboxId === null) waiter.earlyNotices.push(text);
      else void this.settleNotice(waiter, text);
    }
  }

  /** Resolves with the notice unless the waiter's message is still open (queued for a turn). */
  private async settleNotice(waiter: Waiter, text: string): Promise<void> {
    const open = await this.isInboxOpen(waiter.inboxId!).catch(() => false);
    if (!open && waiter.turnId === null) waiter.resolve({ kind: "reply", text });
  }

  failAll(text: string): void {
    for (const waiter of this.waiters) waiter.resolve({ kind: "error", text });
  }

  private apply(waiter: Waiter, event: RunnerEvent): void {
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
    if (event.type === "turn_end") {
      const kind =
        event.stopReason === "error"
          ? "error"
          : event.stopReason === "aborted"
            ? "interrupted"
            : "reply";
      waiter.resolve({ kind, text: event.reply });
    }
  }
}
