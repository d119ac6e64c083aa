/** Live events the runner publishes while turns run (streaming to API clients and the web chat). */
import type { StopReason, TurnEvent } from "../agent/types.js";

export type RunnerEventBody =
  | TurnEvent
  | { type: "turn_start"; inboxId: number | null; resume: boolean }
  | { type: "turn_end"; inboxId: number | null; stopReason: StopReason; reply: string };

export type RunnerEvent = RunnerEventBody & {
  sessionKey: string;
  sessionId: string;
  turnId: number;
};

export type RunnerEventListener = (event: RunnerEvent) => void;

/** A tiny fan-out; a throwing listener is isolated from the others and from the turn. */
export class EventFanout {
  private readonly listeners = new Set<RunnerEventListener>();

  subscribe(listener: RunnerEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: RunnerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A broken subscriber (e.g. a closed socket) must not break the turn it listens to.
      }
    }
  }
}
