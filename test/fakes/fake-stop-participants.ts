import type { ChatAddress } from "../../src/contract/platform.js";
import type {
  RunningTurn,
  StopParticipants,
  StopSummary,
} from "../../src/lifecycle/stop-sequence.js";
import type { ResumeReason } from "../../src/sessions/store.js";

/** An in-memory gateway for the stop sequence: running turns, a call log, and knobs to misbehave. */
export class FakeStopParticipants implements StopParticipants {
  readonly calls: string[] = [];
  readonly sent: { address: ChatAddress; text: string }[] = [];
  readonly marked: { keys: string[]; reason: ResumeReason }[] = [];
  readonly cleared: string[][] = [];
  readonly interruptReasons: string[] = [];
  admissionOpen = true;
  persisted: StopSummary | null = null;
  failSends = false;
  hang = new Set<
    | "notify"
    | "waitForIdle"
    | "interruptAll"
    | "killToolProcesses"
    | "disconnectPlatforms"
    | "markResumePending"
  >();
  /** Turns that end by themselves when interrupted. */
  interruptEndsTurns = true;
  private readonly running = new Map<string, RunningTurn>();

  constructor(turns: RunningTurn[] = []) {
    for (const turn of turns) this.running.set(turn.sessionKey, turn);
  }

  finish(key: string): void {
    this.running.delete(key);
  }

  closeAdmission(): void {
    this.calls.push("closeAdmission");
    this.admissionOpen = false;
  }

  runningTurns(): RunningTurn[] {
    return [...this.running.values()];
  }

  async notify(address: ChatAddress, text: string): Promise<void> {
    this.calls.push("notify");
    if (this.hang.has("notify")) return never();
    if (this.failSends) throw new Error("network error");
    this.sent.push({ address, text });
  }

  async markResumePending(keys: string[], reason: ResumeReason): Promise<void> {
    this.calls.push("markResumePending");
    if (this.hang.has("markResumePending")) return never();
    this.marked.push({ keys, reason });
  }

  async clearResumePending(keys: string[]): Promise<void> {
    this.calls.push("clearResumePending");
    this.cleared.push(keys);
  }

  async waitForIdle(timeoutMs: number): Promise<boolean> {
    this.calls.push(`waitForIdle(${timeoutMs})`);
    if (this.hang.has("waitForIdle")) return never();
    const deadline = Date.now() + timeoutMs;
    while (this.running.size > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 5));
    return this.running.size === 0;
  }

  async interruptAll(reason: string): Promise<void> {
    this.calls.push("interruptAll");
    this.interruptReasons.push(reason);
    if (this.hang.has("interruptAll")) return never();
    if (this.interruptEndsTurns) this.running.clear();
  }

  async killToolProcesses(): Promise<void> {
    this.calls.push("killToolProcesses");
    if (this.hang.has("killToolProcesses")) return never();
  }

  async disconnectPlatforms(): Promise<void> {
    this.calls.push("disconnectPlatforms");
    if (this.hang.has("disconnectPlatforms")) return never();
  }

  async persist(summary: StopSummary): Promise<void> {
    this.calls.push("persist");
    this.persisted = summary;
  }
}

function never(): Promise<never> {
  return new Promise(() => undefined);
}
