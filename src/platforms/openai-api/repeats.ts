/**
 * Requests that repeat an earlier one (same Idempotency-Key, same request) never start work:
 * they read the first request's answer from the store, and while it is still open (queued,
 * running, or cut off by a restart and not yet resumed) wait for the next turn of its session
 * to end (or a notice to reach it) and read again. The record is the truth; events only say when
 * to look.
 */

import type { RunnerEvent } from "../../contract/platform.js";
import type { InboxStore } from "../../sessions/store.js";
import { type Completion, completionOfAnswer } from "./outcomes.js";

type Wake = "event" | "stopped" | "aborted";

interface Sleeper {
  /** Null until the answer's session is known: woken by any turn's end. */
  sessionKey: string | null;
  wake(reason: Wake): void;
}

export class Repeats {
  private readonly sleepers = new Set<Sleeper>();
  private stopped = false;

  constructor(private readonly store: InboxStore) {}

  onEvent(event: RunnerEvent): void {
    if (event.type === "turn_end" || event.type === "refused") this.wakeSession(event.sessionKey);
  }

  /** A notice reached the session: it may be the answer to a command (no turn ends then). */
  onNotice(sessionKey: string): void {
    this.wakeSession(sessionKey);
  }

  private wakeSession(sessionKey: string): void {
    for (const sleeper of this.sleepers) {
      if (sleeper.sessionKey === null || sleeper.sessionKey === sessionKey) sleeper.wake("event");
    }
  }

  /**
   * Every waiting repeat reads the record again: the turn that answers it may run on another
   * gateway sharing the store, whose events never come here.
   */
  rereadAll(): void {
    for (const sleeper of this.sleepers) sleeper.wake("event");
  }

  /** Intake (re)opens: repeats wait for answers again. */
  start(): void {
    this.stopped = false;
  }

  /** The gateway stops: waiting repeats are told the work was cut off. */
  stop(): void {
    this.stopped = true;
    for (const sleeper of this.sleepers) sleeper.wake("stopped");
  }

  /** The first request's answer once the record has it; null when `signal` aborts first. */
  async answerOf(inboxId: number, signal: AbortSignal): Promise<Completion | null> {
    for (;;) {
      // Registered before reading, so a turn ending between the read and the wait is not missed.
      const sleeper = this.sleep(signal);
      const answer = await this.store.findInboxAnswer(inboxId).catch((err: unknown) => {
        sleeper.cancel();
        throw err;
      });
      if (answer.state !== "open") {
        sleeper.cancel();
        return completionOfAnswer(answer);
      }
      sleeper.entry.sessionKey = answer.sessionKey;
      const woke = await sleeper.woken;
      if (woke === "stopped") return { kind: "cut_off" };
      if (woke === "aborted") return null;
    }
  }

  private sleep(signal: AbortSignal): { entry: Sleeper; woken: Promise<Wake>; cancel(): void } {
    let wake!: (reason: Wake) => void;
    const woken = new Promise<Wake>((resolve) => (wake = resolve));
    const onAbort = () => entry.wake("aborted");
    const entry: Sleeper = {
      sessionKey: null,
      wake: (reason) => {
        this.sleepers.delete(entry);
        signal.removeEventListener("abort", onAbort);
        wake(reason);
      },
    };
    this.sleepers.add(entry);
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) entry.wake("aborted");
    else if (this.stopped) entry.wake("stopped");
    return { entry, woken, cancel: () => entry.wake("event") };
  }
}
