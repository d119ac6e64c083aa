/** Live events the runner publishes while turns run (streaming to API clients and the web chat). */
import type { RunnerEvent, RunnerEventListener } from "../contract/platform.js";

// The vocabulary is the platform contract's, so that adapters need not import the runner.
export type {
  RefusedEvent,
  RunnerEvent,
  RunnerEventBody,
  RunnerEventListener,
} from "../contract/platform.js";

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
