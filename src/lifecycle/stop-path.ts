/**
 * The one way a gateway closes, after a stop or restart and after a failed start alike. Its steps
 * are named here in the order they run, the reverse of start-up (Fastify's close order): each part
 * arms its step as it comes up, so a start that failed half-way closes exactly what had started.
 */
import type { Logger } from "pino";

export const STOP_STEPS = [
  /** The planned-stop and drain watchers and the scheduler: nothing new is started from now on. */
  "stop watchers",
  /** Approvals stop timing out: a deadline that passes while stopped is applied at the next start. */
  "stop approval deadlines",
  /** Tasks stop starting, timing out and looking for cancellations; their children stop below. */
  "stop tasks",
  /** The restart-loop breaker's pending resume of held-back sessions. */
  "cancel held-back resumes",
  /**
   * A stop or restart runs the stop sequence here (stop-sequence.ts: admission, notices, drain,
   * interrupt, tool processes, platforms, persisted state); a failed start only disconnects.
   */
  "end turns and disconnect platforms",
  /** MCP servers (stdio processes end), after the turns that might call them. */
  "close MCP servers",
  "close HTTP server",
  /** Spans still buffered go to the collector (only with `telemetry.otlp_endpoint`). */
  "flush traces",
  /** With a shared store: heartbeats stop, the instance's row goes and its session leases free. */
  "leave the cluster",
  "close store",
  "release pid file",
] as const;

export type StopStep = (typeof STOP_STEPS)[number];

export class StopPath<Reason> {
  private readonly armed = new Map<StopStep, (reason: Reason) => unknown>();

  /** Arms `step`: it runs at the next close (once), with the reason the gateway closes. */
  arm(step: StopStep, close: (reason: Reason) => unknown): void {
    this.armed.set(step, close);
  }

  /** The armed steps, in the order they would run. */
  pending(): StopStep[] {
    return STOP_STEPS.filter((step) => this.armed.has(step));
  }

  /** Runs the armed steps in STOP_STEPS order; a step that throws is logged and the next runs. */
  async run(reason: Reason, logger: Logger): Promise<void> {
    for (const step of this.pending()) {
      const close = this.armed.get(step);
      this.armed.delete(step);
      try {
        await close?.(reason);
      } catch (err) {
        logger.warn({ err, step }, "stop step failed");
      }
    }
  }
}
