/**
 * One turn, start to finish: record its start, rebuild a valid history from the store, run the
 * agent with a journal that records every step, and record the end together with the reply.
 */
import type { Logger } from "pino";
import type { ChatMessage } from "../agent/types.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { ChatAddress } from "../platforms/platform.js";
import type { Store } from "../sessions/store.js";
import type { AgentRun, IsReadOnlyTool, TurnJournal } from "./agent-run.js";
import type { EventFanout } from "./events.js";
import { AUTO_CONTINUE_NOTE, endsWithUnansweredToolResults, normalizeHistory } from "./history.js";
import type { ActiveTurn } from "./lane.js";
import { RESUME_NOTE, UNKNOWN_OUTCOME } from "./texts.js";

export interface TurnContext {
  store: Store;
  agent: AgentRun;
  isReadOnlyTool: IsReadOnlyTool;
  events: EventFanout;
  logger: Logger;
  crashPoint: CrashPoint;
  /** Called when a reply was queued in the outbox. */
  onReplyQueued(): void;
}

export interface TurnOutcome {
  state: "done" | "interrupted" | "failed";
}

/** Runs `active.work` to its end. Throws only when the store fails (the turn stays `running`). */
export async function executeTurn(ctx: TurnContext, active: ActiveTurn): Promise<TurnOutcome> {
  const { store, events } = ctx;
  const work = active.work;
  const userText =
    work.kind === "message" ? work.item.text : work.kind === "retry" ? work.text : null;
  const turn = await store.startTurn({
    sessionKey: active.sessionKey,
    inboxId: work.kind === "message" ? work.item.id : null,
    userMessage: userText === null ? null : { role: "user", content: userText },
  });
  ctx.crashPoint("after_turn_start");
  active.turnId = turn.id;
  active.sessionId = turn.sessionId;
  const base = { sessionKey: active.sessionKey, sessionId: turn.sessionId, turnId: turn.id };
  events.emit({
    ...base,
    type: "turn_start",
    inboxId: turn.inboxId,
    resume: work.kind === "resume",
  });

  const history = await buildHistory(ctx, turn.sessionId, work.kind === "resume");
  // From here the model is working on it: a stop notifies this chat and marks it for resume.
  active.agentStarted = true;
  const result = await ctx.agent({
    history,
    signal: active.controller.signal,
    journal: createJournal(ctx, active, turn.id, turn.sessionId),
    onEvent: (event) => {
      if (event.type === "tool_start") active.currentTool = event.name;
      if (event.type === "tool_end") active.currentTool = null;
      events.emit({ ...base, ...event });
    },
    takeSteeredInput: () => takeSteered(active),
  });

  const state =
    result.stopReason === "aborted"
      ? "interrupted"
      : result.stopReason === "error"
        ? "failed"
        : "done";
  const replyText = state === "interrupted" ? "" : result.reply;
  const address = active.address;
  const outbox = await store.finishTurn({
    turnId: turn.id,
    state,
    finalMessage: result.finalMessage,
    reply: replyText && address ? { address, text: replyText } : null,
  });
  await closeSteered(ctx, active);
  if (outbox) {
    ctx.crashPoint("after_reply_queued");
    ctx.onReplyQueued();
  }
  events.emit({
    ...base,
    type: "turn_end",
    inboxId: turn.inboxId,
    stopReason: result.stopReason,
    reply: replyText,
  });
  ctx.logger.info(
    {
      session: active.sessionKey,
      turn: turn.id,
      stopReason: result.stopReason,
      iterations: result.iterations,
      error: result.errorMessage,
    },
    "turn finished",
  );
  return { state };
}

/**
 * Loads the transcript and makes it safe to send: tool calls cut off by a crash get an
 * "outcome unknown" result (never silently re-run, unless read-only), and the model is told when
 * it is resuming or when earlier tool results went unanswered.
 */
async function buildHistory(
  ctx: TurnContext,
  sessionId: string,
  resume: boolean,
): Promise<ChatMessage[]> {
  const unfinished = await ctx.store.listUnfinishedToolCalls(sessionId);
  for (const call of unfinished) {
    if (ctx.isReadOnlyTool(call.name)) continue;
    await ctx.store.recordToolFinish({
      toolCallId: call.toolCallId,
      sessionId,
      turnId: call.turnId,
      result: UNKNOWN_OUTCOME,
    });
  }
  const stored = (await ctx.store.loadTranscript(sessionId)).map((m) => m.message);
  const history = normalizeHistory(stored);
  if (resume) return withResumeNote(history);
  const last = history[history.length - 1];
  const before = history.slice(0, -1);
  if (last?.role === "user" && endsWithUnansweredToolResults(before)) {
    return [...before, { role: "system", content: AUTO_CONTINUE_NOTE }, last];
  }
  return history;
}

/**
 * Adds the resume note. It goes last, unless the history ends with tool calls that still have to
 * run (asked for, never started, or read-only): the agent loop runs only trailing calls, so the
 * note goes before their assistant message instead of hiding them.
 */
function withResumeNote(history: ChatMessage[]): ChatMessage[] {
  const note: ChatMessage = { role: "system", content: RESUME_NOTE };
  const at = history.findLastIndex((m) => m.role === "assistant");
  if (!endsWithCallsToRun(history, at)) return [...history, note];
  return [...history.slice(0, at), note, ...history.slice(at)];
}

/** True when the assistant message at `at` asked for tools, only results follow, and some are missing. */
function endsWithCallsToRun(history: ChatMessage[], at: number): boolean {
  const assistant = history[at];
  if (assistant?.role !== "assistant" || !assistant.tool_calls?.length) return false;
  const answered = new Set<string>();
  for (const m of history.slice(at + 1)) {
    if (m.role !== "tool") return false;
    answered.add(m.tool_call_id);
  }
  return assistant.tool_calls.some((call) => !answered.has(call.id));
}

function createJournal(
  ctx: TurnContext,
  active: ActiveTurn,
  turnId: number,
  sessionId: string,
): TurnJournal {
  return {
    recordMessages: async (messages) => {
      active.agentStarted = true;
      await ctx.store.appendMessages(sessionId, turnId, messages);
      // Steered messages are in the transcript now: close their inbox rows at once, or a crash
      // before the turn ends would dispatch them again after the restart (a second turn).
      await closeSteered(ctx, active);
      ctx.crashPoint("after_model_call");
    },
    recordToolStart: async (call) => {
      active.agentStarted = true;
      await ctx.store.recordToolStart({
        toolCallId: call.id,
        turnId,
        sessionId,
        name: call.function.name,
        arguments: call.function.arguments,
      });
      ctx.crashPoint("after_tool_started");
    },
    recordToolFinish: async (call, output) => {
      ctx.crashPoint("after_tool_ran");
      await ctx.store.recordToolFinish({
        toolCallId: call.id,
        sessionId,
        turnId,
        result: output.output,
      });
      ctx.crashPoint("after_tool_finished");
    },
  };
}

/** Hands steered messages to the loop; their inbox rows close once the journal has recorded them. */
function takeSteered(active: ActiveTurn): string[] {
  const items = active.steer.splice(0);
  active.steerTaken.push(...items);
  return items.map((item) => item.text);
}

async function closeSteered(ctx: TurnContext, active: ActiveTurn): Promise<void> {
  for (const item of active.steerTaken.splice(0)) await ctx.store.closeInboxItem(item.id, "done");
}

/** The address a turn's reply goes to: the message's chat, or the session's origin on resume. */
export function replyAddress(
  active: Pick<ActiveTurn, "work">,
  origin: ChatAddress | null,
): ChatAddress | null {
  const work = active.work;
  if (work.kind === "message") return work.item.address;
  if (work.kind === "retry") return work.address;
  return origin;
}
