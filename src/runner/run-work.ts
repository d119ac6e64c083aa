/**
 * One piece of a lane's work run to its end: the session's lease (several gateways), the reply
 * address, the checks that make a resume or an approval's continuation moot, then the journaled
 * turn (turn.ts) with typing shown meanwhile.
 */
import type { InboxItem, SessionRecord } from "../sessions/store.js";
import type { AgentRun } from "./agent-run.js";
import type { CutOffSessions } from "./cut-off.js";
import type { EventFanout } from "./events.js";
import { hasOpenToolCalls, needsAnswer } from "./history.js";
import type { ActiveTurn, Work } from "./lane.js";
import { batchItems } from "./lane-batch.js";
import type { Replies } from "./replies.js";
import type { RunnerOptions } from "./runner-options.js";
import { claimTurnLease, renewTurnLease } from "./session-lease.js";
import { TEXT } from "./texts.js";
import { replyAddress, runJournaledTurn, type TurnContext } from "./turn.js";

/** What running work needs of the runner. */
export interface WorkHost {
  options: RunnerOptions;
  events: EventFanout;
  cutOff: CutOffSessions;
  replies: Replies;
  logFailure(err: unknown, item: InboxItem | null): void;
  retryWhenStoreAnswers(item: InboxItem): void;
  /** The same for work without a message (a resume, an approval's continuation, a `/retry`). */
  requeueWhenStoreAnswers(sessionKey: string, work: Work): void;
}

/** Runs one piece of work; never rejects (a failure is logged and reported to listeners). */
export async function runWork(host: WorkHost, active: ActiveTurn): Promise<void> {
  const item = active.work.kind === "message" ? active.work.item : null;
  const leases = host.options.sessionLeases;
  let renewal: NodeJS.Timeout | undefined;
  try {
    if (leases) {
      active.lease = await claimTurnLease(host.options.store, active, leases);
      if (!active.lease) return;
      renewal = setInterval(
        () => void renewTurnLease(host.options.store, host.options.logger, active, leases.ttlMs),
        leases.ttlMs / 3,
      );
      renewal.unref();
    }
    // A message or a retry answers its own chat; other work reads where the session is.
    const kind = active.work.kind;
    const session =
      kind === "message" || kind === "retry"
        ? null
        : await host.options.store.getSession(active.sessionKey);
    active.address = replyAddress(active, session?.origin ?? null);
    // A task that has ended (cancelled, expired, timed out) runs nothing more, resumes included.
    const tasks = host.options.tasks;
    if (tasks?.isChild(active.sessionKey) && !(await tasks.admits(active.sessionKey))) {
      if (item) await host.options.store.closeInboxItem(item.id, "cancelled");
      return;
    }
    // A resume is moot once a newer turn has continued the session (its mark is gone).
    if (active.work.kind === "resume" && (!active.address || !session?.resumePending)) return;
    // An answer for a transcript `/new` has left behind has nothing to continue, nor one whose
    // calls another turn (a resume after a restart) has already answered.
    if (active.work.kind === "continue" && !(await continues(host, active.work, session))) return;
    const agent = host.options.agent;
    if (!agent) {
      await answerWithoutModel(host, active);
      return;
    }
    const stopTyping = active.address ? host.options.showTyping?.(active.address) : undefined;
    try {
      await runJournaledTurn(turnContext(host, agent), active);
    } finally {
      stopTyping?.();
    }
    if (active.abortCause === "user_stop" && active.address) {
      await host.replies.notice(active.sessionKey, active.address, TEXT.stopped);
    }
  } catch (err) {
    workFailed(host, active, err);
  } finally {
    clearInterval(renewal);
    const lease = active.lease;
    if (lease) {
      await host.options.store.releaseSessionLease(lease).catch((err: unknown) => {
        host.options.logger.warn({ err, session: active.sessionKey }, "lease release failed");
        if (host.cutOff.has(active.sessionKey)) host.cutOff.keepUnreleased(lease);
      });
    }
  }
}

/**
 * Typically the store failing (disk full, a database restarting): the turn stays `running` in the
 * record and is recovered later. Waiting clients must not hang meanwhile.
 */
function workFailed(host: WorkHost, active: ActiveTurn, err: unknown): void {
  const item = active.work.kind === "message" ? active.work.item : null;
  const leases = host.options.sessionLeases;
  host.logFailure(err, item);
  // Its turn never started (the database did not answer): the message is still pending and
  // nobody else runs it while this gateway lives, so it is tried again here.
  if (item && active.turnId === null) host.retryWhenStoreAnswers(item);
  // The same for a resume: the session stays resume-pending in the record, and nothing else
  // would queue its resume again while this gateway lives (it was a takeover's, or the start's).
  if (!item && active.turnId === null) host.requeueWhenStoreAnswers(active.sessionKey, active.work);
  // Its turn started: the record keeps it running until it is taken over and resumed.
  if (active.turnId !== null && leases) host.cutOff.holdUntilResumed(active.sessionKey);
  host.events.emit({
    sessionKey: active.sessionKey,
    sessionId: active.sessionId,
    turnId: active.turnId ?? -1,
    type: "turn_end",
    inboxId: item?.id ?? null,
    stopReason: "error",
    reply: leases
      ? "Keel could not record this turn; it will be resumed once the database answers again."
      : "Keel could not record this turn; it will be retried after the gateway restarts.",
    abortCause: active.abortCause,
  });
}

async function continues(
  host: WorkHost,
  work: Extract<Work, { kind: "continue" }>,
  session: SessionRecord | null,
): Promise<boolean> {
  if (session?.sessionId !== work.sessionId) return false;
  const transcript = (await host.options.store.loadTranscript(work.sessionId)).map(
    (m) => m.message,
  );
  // After a budget pause: unless a newer turn already answered what waited.
  if (work.budget) return needsAnswer(transcript);
  return hasOpenToolCalls(transcript);
}

/**
 * No model is configured (a resume or `/retry` after the model was removed from the config):
 * the agent is never reached and nothing is left running; the chat gets the no-model text.
 */
async function answerWithoutModel(host: WorkHost, active: ActiveTurn): Promise<void> {
  const work = active.work;
  if (work.kind === "message") {
    const [first, ...rest] = batchItems(work);
    for (const item of rest) await host.options.store.closeInboxItem(item.id, "done");
    await host.replies.answer(first!, TEXT.noModel, "done");
    return;
  }
  if (work.kind === "resume") await host.options.store.clearResumePending(active.sessionKey);
  if (active.address) await host.replies.notice(active.sessionKey, active.address, TEXT.noModel);
}

function turnContext(host: WorkHost, agent: AgentRun): TurnContext {
  const { store, isReadOnlyTool, logger, crashPoint, onReplyQueued, progress } = host.options;
  const { approvals, repliesInBand, tasks, budgets } = host.options;
  return {
    ...(approvals && { approvals }),
    ...(budgets && { budgets }),
    ...(tasks && { tasks }),
    ...(repliesInBand && { repliesInBand }),
    store,
    agent,
    isReadOnlyTool,
    events: host.events,
    logger,
    crashPoint,
    onReplyQueued,
    media: host.options.media ?? null,
    progress,
  };
}
