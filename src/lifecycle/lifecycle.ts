/**
 * The gateway's life in one place: its state, the one stop or restart request it honours, and the
 * exit code it ends with. The composition root builds it before any part, so every part that asks
 * about the gateway's life (readiness, the status feed, a chat's `/restart`, the watchers) holds
 * it directly; the gateway engine moves it from state to state as it starts and stops its parts.
 * It owns no part itself.
 */
import type { Supervisor } from "./exit-code.js";
import { planStopEpilogue, type StopEpilogue, type StopRequest } from "./stop-sequence.js";

/**
 * Where the gateway is in its life. Only these moves exist (see {@link Lifecycle}):
 * starting → running ⇄ draining; starting | running | draining → stopping → stopped;
 * starting → failed.
 */
export type GatewayState =
  /** Parts are coming up (pid file, HTTP, recovery, platforms, resumes). Not ready. */
  | "starting"
  /** Every part is up and the resumes are dispatched: ready, taking new turns. */
  | "running"
  /**
   * The reversible maintenance drain (`.drain_request.json`): no new turns, running ones finish,
   * internal work still runs. Not ready. The gateway never leaves it by exiting on its own.
   */
  | "draining"
  /** A stop or restart runs its stop pass. It never turns back. Not ready. */
  | "stopping"
  /** The stop pass has run; `exited` has its exit code. */
  | "stopped"
  /** Start-up failed; what had started was closed again; `exited` has 1. */
  | "failed";

/** A stop or restart as asked for; the lifecycle adds how this process's supervisor restarts. */
export interface StopAsk {
  restart: boolean;
  signalInitiated: boolean;
  storeFailed?: boolean;
  /** The `/restart` message, when a chat asked. */
  restartCommand?: StopRequest["restartCommand"];
}

/** The moves {@link Lifecycle.moveTo} allows, from each state. */
const MOVES: Record<GatewayState, readonly GatewayState[]> = {
  starting: ["running", "stopping", "failed"],
  running: ["draining", "stopping"],
  draining: ["running", "stopping"],
  stopping: ["stopped"],
  stopped: [],
  failed: [],
};

export class Lifecycle {
  private current: GatewayState = "starting";
  private stop: { request: StopRequest; plan: StopEpilogue } | null = null;
  private readonly stopListeners: ((request: StopRequest) => void)[] = [];
  private readonly statusListeners = new Set<() => void>();
  private readonly stopAsked: Promise<StopRequest>;
  private resolveStopAsked!: (request: StopRequest) => void;
  /** The process exit code, once the gateway stopped or failed to start. */
  readonly exited: Promise<number>;
  private resolveExit!: (code: number) => void;

  constructor(
    private readonly supervisor: Supervisor,
    private readonly now: () => number = Date.now,
  ) {
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    this.stopAsked = new Promise((resolve) => (this.resolveStopAsked = resolve));
  }

  state(): GatewayState {
    return this.current;
  }

  /** Running and taking turns: the lifecycle's half of `/readyz` (the store's health is the other). */
  isRunning(): boolean {
    return this.current === "running";
  }

  /**
   * Moves to `next` when that move exists, and tells the status listeners; returns whether it
   * moved (entering a drain twice, or leaving one a stop overtook, changes nothing).
   */
  moveTo(next: GatewayState): boolean {
    if (!MOVES[this.current].includes(next)) return false;
    this.current = next;
    this.emitStatusChange();
    return true;
  }

  /** Start-up failed: the process ends with 1, whatever stop was asked for meanwhile. */
  fail(): void {
    if (this.moveTo("failed")) this.resolveExit(1);
  }

  /** The stop pass has run: the process ends with `code`. */
  finish(code: number): void {
    if (this.moveTo("stopped")) this.resolveExit(code);
  }

  /**
   * Asks for a stop or restart. Only the first ask counts (later ones change nothing and get
   * `accepted: false`); its epilogue (what to persist, the exit code, the successor) is planned
   * here, once. It runs once start-up has finished (see {@link whenStopAsked}).
   */
  requestStop(ask: StopAsk): { accepted: boolean } {
    if (this.stop !== null) return { accepted: false };
    const request: StopRequest = {
      restart: ask.restart,
      signalInitiated: ask.signalInitiated,
      ...(ask.storeFailed && { storeFailed: true }),
      restartCommand: ask.restartCommand ?? null,
      viaService: this.supervisor !== null,
      detached: this.supervisor === null,
    };
    const plan = planStopEpilogue({ request, supervisor: this.supervisor, now: this.now() });
    this.stop = { request, plan };
    for (const listener of this.stopListeners) listener(request);
    this.resolveStopAsked(request);
    return { accepted: true };
  }

  /** The stop or restart under way (asked for), if any. */
  stopRequest(): StopRequest | null {
    return this.stop?.request ?? null;
  }

  /** How the stop under way ends (planned when it was asked for), if one is. */
  stopPlan(): StopEpilogue | null {
    return this.stop?.plan ?? null;
  }

  /** Resolves with the stop request once one was asked for: the engine runs its stop pass then. */
  whenStopAsked(): Promise<StopRequest> {
    return this.stopAsked;
  }

  /** Called once, when a stop or restart is asked for, however it was asked for. */
  onStopRequested(listener: (request: StopRequest) => void): void {
    this.stopListeners.push(listener);
  }

  /** Something the status shows may have changed (for the live dashboard stream). */
  onStatusChange(listener: () => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  emitStatusChange(): void {
    for (const listener of this.statusListeners) listener();
  }
}

/**
 * The state as `gateway_state.json` and `/api/status` show it: a stop under way shows as
 * `draining` (turns are being let finish), a failed start as `startup_failed`.
 */
export function reportedState(
  state: GatewayState,
): "starting" | "running" | "draining" | "stopped" | "startup_failed" {
  if (state === "stopping") return "draining";
  if (state === "failed") return "startup_failed";
  return state;
}
