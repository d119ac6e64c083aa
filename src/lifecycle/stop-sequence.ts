/**
 * The stop orchestration, over a small participant interface the gateway implements: close
 * admission, tell each affected chat once, mark cut-off sessions resume-pending before waiting,
 * drain, interrupt, kill tool process groups before disconnecting platforms. Every step has its
 * own deadline, so the whole stop ends within the drain timeout plus about ten seconds even when
 * a participant hangs.
 */
import type { Logger } from "pino";
import type { ChatAddress } from "../contract/platform.js";
import {
  RESTART_NOTICE,
  RESTART_NOTICE_AUTO_RESUME,
  STOP_NOTICE,
} from "../runner/lifecycle-texts.js";
import type { ResumeReason } from "../sessions/store.js";
import { exitCodeFor, type Supervisor } from "./exit-code.js";
import type { RestartPending } from "./markers.js";

export interface RunningTurn {
  sessionKey: string;
  /** Where the turn's chat is; null when unknown (no notice then). */
  address: ChatAddress | null;
  /** False while the turn is queued or its agent is still starting: no notice, no resume mark. */
  agentStarted: boolean;
}

/** What the stop sequence needs from the gateway. Any method may hang or throw; each is bounded. */
export interface StopParticipants {
  /** Refuse new turns from now on (synchronous: nothing may slip in after it). */
  closeAdmission(): void;
  runningTurns(): RunningTurn[];
  /** Sends one lifecycle notice (outbox or direct). */
  notify(address: ChatAddress, text: string): Promise<void>;
  markResumePending(keys: string[], reason: ResumeReason): Promise<void>;
  /** Undo the pre-drain marks of sessions whose turn finished during the drain. */
  clearResumePending(keys: string[]): Promise<void>;
  /** Resolves true once no turn runs, false when `timeoutMs` passed first. */
  waitForIdle(timeoutMs: number): Promise<boolean>;
  interruptAll(reason: string): void | Promise<void>;
  /** Kills every tool subprocess's whole process group. */
  killToolProcesses(): void | Promise<void>;
  disconnectPlatforms(): Promise<void>;
  /** Last step: persist final state (`.clean_shutdown`, gateway_state.json, markers). */
  persist?(summary: StopSummary): Promise<void>;
}

/** Per-step deadlines (ms). Their sum stays under the ten-second margin over the drain timeout. */
export interface StopBudgets {
  notifyMs: number;
  markMs: number;
  interruptGraceMs: number;
  killMs: number;
  disconnectMs: number;
  persistMs: number;
}

// Worst case after the drain: notify 1.5 + interrupt 1.5 + grace 1.5 + kill 1 + disconnect 2 +
// persist 0.5 = 8 s, leaving room under the 10 s margin for closing HTTP and the store.
export const DEFAULT_STOP_BUDGETS: StopBudgets = {
  notifyMs: 1500,
  markMs: 1000,
  interruptGraceMs: 1500,
  killMs: 1000,
  disconnectMs: 2000,
  persistMs: 500,
};

export interface StopOptions {
  restart: boolean;
  /** `agent.restart_drain_timeout` in ms; 0 = do not wait, interrupt at once. */
  drainTimeoutMs: number;
  /** The `/restart` message when the restart was asked from a chat: the notice there answers it. */
  restartCommand?: ChatAddress | null;
  /** Home channels; they get the notice too unless the restart was asked from a chat. */
  homeChannels?: ChatAddress[];
  /** Cut-off sessions will continue by themselves after the restart (changes the wording). */
  autoResume?: boolean;
  logger: Logger;
  budgets?: Partial<StopBudgets>;
}

export interface StopSummary {
  restart: boolean;
  /** Sessions with a running turn when the stop began. */
  runningAtStart: string[];
  /** Sessions whose turn was still running after the drain and was interrupted. */
  interrupted: string[];
  /** True when no turn was cut off: the caller writes `.clean_shutdown`. */
  clean: boolean;
  noticesSent: number;
  /** Steps that hit their deadline or threw. */
  failedSteps: string[];
}

/** Runs the stop sequence once; never throws. */
export async function runStopSequence(
  participants: StopParticipants,
  options: StopOptions,
): Promise<StopSummary> {
  const budgets = { ...DEFAULT_STOP_BUDGETS, ...options.budgets };
  const failedSteps: string[] = [];
  const step = <T>(name: string, ms: number, fn: () => T | Promise<T>) =>
    bounded(name, ms, fn, options.logger, failedSteps);

  await step("close_admission", budgets.markMs, () => participants.closeAdmission());
  const atStart =
    (await step("running_turns", budgets.markMs, () => participants.runningTurns())) ?? [];
  const started = unique(
    atStart.filter((turn) => turn.agentStarted).map((turn) => turn.sessionKey),
  );
  const reason: ResumeReason = options.restart ? "restart_timeout" : "shutdown_timeout";
  const text = options.restart
    ? options.autoResume
      ? RESTART_NOTICE_AUTO_RESUME
      : RESTART_NOTICE
    : STOP_NOTICE;
  const targets = noticeTargets(
    atStart,
    options.restartCommand ?? null,
    options.homeChannels ?? [],
  );

  const [noticesSent] = await Promise.all([
    sendNotices(targets, text, participants, budgets.notifyMs, options.logger),
    started.length > 0
      ? step("mark_resume_pending", budgets.markMs, () =>
          participants.markResumePending(started, reason),
        )
      : undefined,
  ]);

  const stillRunning = await drain(participants, atStart.length, options.drainTimeoutMs, step);
  const finished = started.filter((key) => !stillRunning.includes(key));
  if (finished.length > 0) {
    await step("clear_resume_pending", budgets.markMs, () =>
      participants.clearResumePending(finished),
    );
  }
  if (stillRunning.length > 0) {
    options.logger.warn({ sessions: stillRunning }, "drain timed out; interrupting running turns");
    await step("interrupt", budgets.interruptGraceMs, () =>
      participants.interruptAll(options.restart ? "Gateway restarting" : "Gateway shutting down"),
    );
    await step("interrupt_grace", budgets.interruptGraceMs, () =>
      participants.waitForIdle(budgets.interruptGraceMs),
    );
  }
  await step("kill_tool_processes", budgets.killMs, () => participants.killToolProcesses());
  await step("disconnect_platforms", budgets.disconnectMs, () =>
    participants.disconnectPlatforms(),
  );

  const summary: StopSummary = {
    restart: options.restart,
    runningAtStart: unique(atStart.map((turn) => turn.sessionKey)),
    interrupted: stillRunning,
    clean: stillRunning.length === 0,
    noticesSent: noticesSent ?? 0,
    failedSteps,
  };
  const persist = participants.persist;
  if (persist !== undefined)
    await step("persist", budgets.persistMs, () => persist.call(participants, summary));
  return summary;
}

type Step = <T>(name: string, ms: number, fn: () => T | Promise<T>) => Promise<T | undefined>;

/** Waits for running turns up to the drain timeout; returns the session keys still running. */
async function drain(
  participants: StopParticipants,
  runningAtStart: number,
  drainTimeoutMs: number,
  step: Step,
): Promise<string[]> {
  if (runningAtStart === 0) return [];
  if (drainTimeoutMs > 0) {
    // A small slack lets a well-behaved waitForIdle report its own timeout first.
    const idle = await step("drain", drainTimeoutMs + 250, () =>
      participants.waitForIdle(drainTimeoutMs),
    );
    if (idle === true) return [];
  }
  const now = (await step("running_turns", 500, () => participants.runningTurns())) ?? [];
  return unique(now.map((turn) => turn.sessionKey));
}

/**
 * One notice per chat (platform + chat + thread) with a started turn. In the chat the `/restart`
 * came from, the notice answers that message. Home channels are added (deduplicated) only when
 * the restart was not asked from a chat and some turn is being cut off.
 */
export function noticeTargets(
  turns: RunningTurn[],
  restartCommand: ChatAddress | null,
  homeChannels: ChatAddress[],
): ChatAddress[] {
  const targets = new Map<string, ChatAddress>();
  for (const turn of turns) {
    if (!turn.agentStarted || turn.address === null) continue;
    const id = chatId(turn.address);
    if (targets.has(id)) continue;
    targets.set(
      id,
      restartCommand !== null && chatId(restartCommand) === id ? restartCommand : turn.address,
    );
  }
  if (restartCommand === null && targets.size > 0) {
    for (const home of homeChannels) {
      if (!targets.has(chatId(home))) targets.set(chatId(home), home);
    }
  }
  return [...targets.values()];
}

function chatId(address: ChatAddress): string {
  return `${address.platform}\0${address.chatId}\0${address.threadId ?? ""}`;
}

/** Sends all notices in parallel, each bounded; a failed or hung send never blocks. */
async function sendNotices(
  targets: ChatAddress[],
  text: string,
  participants: StopParticipants,
  timeoutMs: number,
  logger: Logger,
): Promise<number> {
  const results = await Promise.all(
    targets.map((address) =>
      bounded(
        "notify",
        timeoutMs,
        () => participants.notify(address, text).then(() => true),
        logger,
        [],
      ),
    ),
  );
  return results.filter((sent) => sent === true).length;
}

/** Runs `fn` with a deadline; on timeout or error logs, records the step and resolves undefined. */
async function bounded<T>(
  name: string,
  ms: number,
  fn: () => T | Promise<T>,
  logger: Logger,
  failedSteps: string[],
): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms);
  });
  try {
    const outcome = await Promise.race([Promise.resolve().then(fn), timeout]);
    if (outcome === "timeout") {
      logger.warn({ step: name, timeoutMs: ms }, "stop step timed out");
      failedSteps.push(name);
      return undefined;
    }
    return outcome as T;
  } catch (error) {
    logger.warn({ err: error, step: name }, "stop step failed");
    failedSteps.push(name);
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

function unique(keys: string[]): string[] {
  return [...new Set(keys)];
}

/** One stop or restart request: who asked and how. */
export interface StopRequest {
  restart: boolean;
  /** Restart outside a supervisor: a detached successor starts the new gateway. */
  detached: boolean;
  /** Restart through the supervisor (systemd / launchd / container). */
  viaService: boolean;
  /**
   * An unplanned stop: a SIGTERM nobody announced (no planned-stop marker), or a failed store
   * (`storeFailed`). Exit 1, and the state stays `running` for whoever starts it again.
   */
  signalInitiated: boolean;
  /** The store failed for good (store-failure-watcher.ts); always with `signalInitiated`. */
  storeFailed?: boolean;
  /** The `/restart` message, when asked from a chat. */
  restartCommand: ChatAddress | null;
}

export interface StopEpilogue {
  /**
   * Write `.clean_shutdown` when no turn was cut off ({@link writesCleanShutdown}); never after a
   * failed store, whose record may lack its last commits.
   */
  cleanShutdownIfClean: boolean;
  /** Write `.restart_pending.json` (a restart not asked from a chat). */
  restartPending: RestartPending | null;
  /** Final `gateway_state`: an unexpected SIGTERM keeps `running`; everything else `stopped`. */
  gatewayState: "running" | "stopped";
  /** Why the gateway stopped, as `gateway_state.json` records it. */
  exitReason: "restart" | "store_failed" | "signal" | "planned_stop";
  exitCode: number;
  /** Spawn the detached successor (restart outside a supervisor). */
  launchDetachedSuccessor: boolean;
  /** Schedule `systemctl restart` of the own unit in a transient unit (restart under systemd). */
  scheduleSystemdRestart: boolean;
}

/**
 * Pure: what to persist and how to exit, planned once when the stop is asked for (the lifecycle
 * holds the plan; the stop pass persists it and the process exits by it).
 */
export function planStopEpilogue(input: {
  request: StopRequest;
  supervisor: Supervisor;
  now: number;
}): StopEpilogue {
  const { request, supervisor } = input;
  const restart = request.restart;
  return {
    cleanShutdownIfClean: !request.storeFailed,
    restartPending:
      restart && request.restartCommand === null
        ? { requested_at: input.now, via_service: request.viaService, detached: request.detached }
        : null,
    gatewayState: !restart && request.signalInitiated ? "running" : "stopped",
    exitReason: restart
      ? "restart"
      : request.storeFailed
        ? "store_failed"
        : request.signalInitiated
          ? "signal"
          : "planned_stop",
    exitCode: restart
      ? exitCodeFor({ kind: "restart", supervisor })
      : exitCodeFor({ kind: request.signalInitiated ? "unexpected_signal" : "planned_stop" }),
    launchDetachedSuccessor: restart && supervisor === null,
    scheduleSystemdRestart: restart && supervisor === "systemd",
  };
}

/** `.clean_shutdown` is written when the plan trusts the record and the stop cut nothing off. */
export function writesCleanShutdown(
  plan: Pick<StopEpilogue, "cleanShutdownIfClean">,
  summary: Pick<StopSummary, "clean">,
): boolean {
  return plan.cleanShutdownIfClean && summary.clean;
}
