/**
 * Whether the model answers at all: since when every call has failed (null while the last call
 * that counted succeeded). A stop by the user or a prompt too long for the window says nothing
 * about the model's health and is not counted. Read by the alerts (src/alerts).
 */
import type { ModelAttempt } from "./model-chain.js";

export interface ModelFailing {
  since: number;
  model: string;
  error: string;
}

export class ModelHealth {
  private failing: ModelFailing | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  record(attempt: ModelAttempt): void {
    if (attempt.outcome === "ok") {
      this.failing = null;
      return;
    }
    if (attempt.outcome === "aborted" || attempt.outcome === "context_exceeded") return;
    const error = attempt.error ?? attempt.outcome;
    this.failing = { since: this.failing?.since ?? this.now(), model: attempt.model, error };
  }

  /** Since when every counted call failed, and the last failure; null when healthy. */
  failingSince(): ModelFailing | null {
    return this.failing && { ...this.failing };
  }
}
