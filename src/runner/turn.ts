/**
 * One turn, start to finish: record its start, rebuild a valid history from the store, run the
 * agent with a journal that records every step, and record the end together with the reply.
 */
import type { Logger } from "pino";
import type { UserContent } from "../agent/content.js";
import type { CallUsage, ChatMessage, TurnResult } from "../agent/types.js";
import { createCompactionSink, visibleMessages } from "../context/compaction-record.js";
import type {
  ChatAddress,
  OutboundFile,
  ProgressStep,
  ProgressUpdate,
  TurnUsage,
} from "../contract/platform.js";
import type { CrashPoint } from "../lib/crash-point.js";
import { memoryUserOf } from "../memory/memory-file.js";
import {
  type InboxItem,
  InboxItemTakenError,
  type InboxStore,
  type OutboxStore,
  type ResumeReason,
  type StartedTurn,
  type TurnStore,
  type UsageScope,
} from "../sessions/store.js";
import type {
  AgentRun,
  GateTurn,
  IsReadOnlyTool,
  TurnApprovals,
  TurnBudgets,
  TurnJournal,
  TurnTaskHooks,
} from "./agent-run.js";
import type { EventFanout } from "./events.js";
import {
  normalizeHistory,
  resumeNote,
  withAutoContinueNote,
  withNoteBeforeTail,
} from "./history.js";
import type { ActiveTurn } from "./lane.js";
import { batchItems } from "./lane-batch.js";
import {
  type MediaSettings,
  NO_VISION_NOTICE,
  NO_VISION_NOTICE_NAME,
  prepareMessageContent,
} from "./media-input.js";
import { isDetachedAddress, isScheduledFire, labelScheduledReply } from "./scheduled-input.js";
import { UNKNOWN_OUTCOME } from "./texts.js";
import { usageScopeOf } from "./usage-scope.js";

export interface TurnContext {
  store: TurnStore & InboxStore & OutboxStore;
  agent: AgentRun;
  isReadOnlyTool: IsReadOnlyTool;
  events: EventFanout;
  logger: Logger;
  crashPoint: CrashPoint;
  /** Called when a reply was queued in the outbox. */
  onReplyQueued(): void;
  /** How a message's files are fetched and read; null: files are named to the model, unread. */
  media?: MediaSettings | null;
  approvals?: TurnApprovals;
  /** Budgets that hold the turn's model calls once spent. */
  budgets?: TurnBudgets;
  /** Shows the turn's progress on its chat's platform (streamed reply, tool lines). */
  progress?(update: ProgressUpdate): void;
  /** Whether the reply reaches `address` through the turn's own events (the API). */
  repliesInBand?(address: ChatAddress): boolean;
  /** Tasks' child sessions (src/tasks). */
  tasks?: TurnTaskHooks;
}

/** Runs `active.work` to its end. Throws only when the store fails (the turn stays `running`). */
export async function runJournaledTurn(ctx: TurnContext, active: ActiveTurn): Promise<void> {
  const begun = await beginTurn(ctx, active);
  if (!begun) return;
  const result = await runAgent(ctx, active, begun);
  await finishTurn(ctx, active, begun, result);
}

/** What the turn's input is: the user's messages (files handled), a `/v1` client's results. */
interface TurnInput {
  userContent: UserContent | null;
  joined: { inboxId: number; userMessage: ChatMessage }[];
  clientResults: { toolCallId: string; content: string }[];
  /** A `/v1` message carrying only the results of the client's calls: it continues from them. */
  resultsOnly: boolean;
}

/** A turn recorded as started, its history rebuilt: what running and finishing it need. */
interface BegunTurn {
  turn: StartedTurn;
  /** The ids every event of the turn carries. */
  base: { sessionKey: string; sessionId: string; turnId: number };
  gateTurn: GateTurn;
  history: ChatMessage[];
  summary: string | null;
  /** The tokens of every model call of the turn, summed as the journal records them. */
  usage: TurnUsage;
  /** The chat that shows the turn's progress, if any. */
  chat: ChatAddress | null;
  show(step: ProgressStep): void;
}

/**
 * Begins the turn: its input, its start recorded (null when there is nothing to run: cut off
 * while its files were fetched, or taken by another gateway), approvals a new message
 * supersedes, and the history rebuilt.
 */
async function beginTurn(ctx: TurnContext, active: ActiveTurn): Promise<BegunTurn | null> {
  const work = active.work;
  const input = await turnInput(ctx, active);
  if (!input) return null;
  const turn = await recordStart(ctx, active, input);
  if (!turn) return null;
  const base = { sessionKey: active.sessionKey, sessionId: turn.sessionId, turnId: turn.id };
  ctx.events.emit({
    ...base,
    type: "turn_start",
    inboxId: turn.inboxId,
    resume: work.kind === "resume",
    ...(work.kind === "message" && { receivedAt: work.item.receivedAt }),
  });
  // A resumed turn, or a new message in a session an interruption left resume-pending, is told
  // what happened so the model continues instead of starting over.
  const session = turn.session;
  const chat = active.address && !isDetachedAddress(active.address) ? active.address : null;
  const gateTurn: GateTurn = {
    sessionKey: active.sessionKey,
    sessionId: turn.sessionId,
    turnId: turn.id,
    address: chat,
    requester: active.requester,
    asker: active.asker,
  };
  // A new message instead of an answer: calls still waiting for approval are not run.
  if ((work.kind === "message" && !input.resultsOnly) || work.kind === "retry") {
    await ctx.approvals?.supersede(gateTurn);
  }
  const resumeFrom = work.kind === "resume" ? work.session : session.resumePending ? session : null;
  const { history, summary } = await buildHistory(
    ctx,
    active,
    turn.sessionId,
    resumeFrom
      ? {
          reason: resumeFrom.resumeReason,
          newInput: work.kind !== "resume",
          userCount: 1 + input.joined.length,
        }
      : null,
  );
  const progress = ctx.progress;
  const show = (step: ProgressStep) => {
    if (chat && progress && !ctx.tasks?.isChild(active.sessionKey)) {
      progress({ turnId: turn.id, address: chat, ...step });
    }
  };
  const usage: TurnUsage = { promptTokens: 0, completionTokens: 0, estimated: false };
  return { turn, base, gateTurn, history, summary, usage, chat, show };
}

/** The turn's input; null when it was cut off before its files were handled. */
async function turnInput(ctx: TurnContext, active: ActiveTurn): Promise<TurnInput | null> {
  const work = active.work;
  // A `/v1` message carrying only the results of the client's calls continues from them (an
  // API message is never part of a batch: it is answered in its own HTTP response).
  const clientResults = work.kind === "message" ? (work.item.clientTools?.results ?? []) : [];
  const resultsOnly = clientResults.length > 0 && work.kind === "message" && !work.item.text;
  let userContent: UserContent | null = work.kind === "retry" ? work.text : null;
  const joined: { inboxId: number; userMessage: ChatMessage }[] = [];
  if (work.kind === "message") {
    const contents = await batchContents(ctx, active, batchItems(work));
    // Cut off before its files were handled: by a gateway stop (the messages stay pending and
    // the next start runs them from the recorded steps) or by `/stop`, `/new` (closed, no turn).
    if (contents === null) return null;
    userContent = resultsOnly && !work.item.attachments?.length ? null : contents[0]!;
    for (const [i, item] of (work.joined ?? []).entries()) {
      joined.push({ inboxId: item.id, userMessage: { role: "user", content: contents[i + 1]! } });
    }
  }
  return { userContent, joined, clientResults, resultsOnly };
}

/** Records the turn's start (one transaction); null when another gateway took the message. */
async function recordStart(
  ctx: TurnContext,
  active: ActiveTurn,
  { userContent, joined, clientResults }: TurnInput,
): Promise<StartedTurn | null> {
  const work = active.work;
  // Background tasks that ended since this session's last message are recorded before it.
  const taskNotes = work.kind === "message" ? await ctx.tasks?.notesFor(active.sessionKey) : null;
  const turn = await ctx.store
    .startTurn({
      ...(taskNotes && { taskNotes }),
      sessionKey: active.sessionKey,
      inboxId: work.kind === "message" ? work.item.id : null,
      userMessage: userContent === null ? null : { role: "user", content: userContent },
      ...(joined.length > 0 && { joined }),
      // A resume continues the request the origin already names; any other turn answers its own.
      origin: work.kind === "resume" ? null : active.address,
      memoryUser: work.kind === "message" ? memoryUserOf(work.item) : null,
      lease: active.lease ?? undefined,
      inputMessages: clientResults.map((r) => ({
        role: "tool" as const,
        tool_call_id: r.toolCallId,
        content: r.content,
      })),
      // Each `/v1` request names the functions its client offers now (none: none).
      ...(work.kind === "message" &&
        work.item.platform === "api" && { clientTools: work.item.clientTools?.tools ?? null }),
    })
    .catch((err: unknown) => {
      // Another gateway sharing the store started this message first (it took over a queue
      // presumed dead): it answers it, this one does nothing.
      if (err instanceof InboxItemTakenError) return null;
      throw err;
    });
  if (!turn) {
    ctx.logger.info({ session: active.sessionKey }, "message already taken by another gateway");
    return null;
  }
  ctx.crashPoint("after_turn_start");
  active.turnId = turn.id;
  active.sessionId = turn.sessionId;
  return turn;
}

/** Runs the agent over the begun turn, its steps journaled and shown as they happen. */
async function runAgent(ctx: TurnContext, active: ActiveTurn, begun: BegunTurn) {
  const { store, events } = ctx;
  const { turn, base, usage, show } = begun;
  const session = turn.session;
  // From here the model is working on it: a stop notifies this chat and marks it for resume.
  active.agentStarted = true;
  const scope = usageScopeOf(active);
  const count = (call: CallUsage | undefined) => countUsage(usage, call);
  show({ type: "turn_start" });
  const result = await ctx.agent({
    history: begun.history,
    signal: active.controller.signal,
    journal: createJournal(ctx, active, turn.id, turn.sessionId, count, scope),
    chat: begun.chat,
    sessionId: turn.sessionId,
    sessionKey: active.sessionKey,
    requester: active.requester,
    summary: begun.summary,
    compactionSink: createCompactionSink({
      store,
      sessionId: turn.sessionId,
      turnId: turn.id,
      crashPoint: ctx.crashPoint,
      scope,
    }),
    preferredModel: session.model,
    memoryUser: session.memoryUser,
    onEvent: (event) => {
      if (event.type === "tool_start") active.currentTool = event.name;
      if (event.type === "tool_end") active.currentTool = null;
      events.emit({ ...base, ...event });
      show({ type: "event", event });
    },
    takeSteeredInput: () => takeSteered(active),
    onImagesRefused: () => {
      const to = active.address;
      if (!to || isDetachedAddress(to)) return;
      store
        .enqueueNoticeOnce({
          sessionKey: active.sessionKey,
          sessionId: turn.sessionId,
          name: NO_VISION_NOTICE_NAME,
          address: to,
          text: NO_VISION_NOTICE,
        })
        .then(() => ctx.onReplyQueued())
        .catch((err: unknown) => ctx.logger.warn({ err }, "no-vision notice not queued"));
    },
    ...(ctx.approvals && { gate: ctx.approvals.gateFor(begun.gateTurn) }),
    ...(ctx.budgets && { modelGate: ctx.budgets.gateFor(begun.gateTurn, scope) }),
    ...(session.clientTools?.length && { clientTools: session.clientTools }),
  });
  count(result.usage);
  return result;
}

/** Adds one model call's tokens to the turn's. */
function countUsage(usage: TurnUsage, call: CallUsage | undefined): void {
  if (!call) return;
  usage.promptTokens += call.promptTokens;
  usage.completionTokens += call.completionTokens;
  usage.estimated ||= call.estimated;
}

/** Finishes the turn: its end and reply recorded in one transaction, then told and logged. */
async function finishTurn(
  ctx: TurnContext,
  active: ActiveTurn,
  { turn, base, usage, show }: BegunTurn,
  result: TurnResult,
): Promise<void> {
  const { store, events } = ctx;
  const state =
    result.stopReason === "aborted"
      ? "interrupted"
      : result.stopReason === "error"
        ? "failed"
        : "done";
  const address = active.address;
  const plainReply = state === "interrupted" ? "" : result.reply;
  const replyText =
    plainReply && address ? withFileLinks(address, plainReply, active.sentFiles) : plainReply;
  const outgoing =
    replyText && address && !isDetachedAddress(address)
      ? outgoingText(ctx, active, replyText, Boolean(result.awaitingApproval))
      : null;
  const outbox = await store.finishTurn({
    turnId: turn.id,
    state,
    finalMessage: result.finalMessage,
    ...(result.usage && { usage: { ...result.usage, scope: usageScopeOf(active) } }),
    reply:
      outgoing && address
        ? {
            address,
            text: outgoing,
            ...(result.awaitingApproval && { approvalId: result.awaitingApproval }),
            ...(ctx.repliesInBand?.(address) && { inBand: true }),
          }
        : null,
    lease: active.lease ?? undefined,
  });
  if (outbox) {
    ctx.crashPoint("after_reply_queued");
    if (outbox.state === "pending") ctx.onReplyQueued();
  }
  show({ type: "turn_end", stopReason: result.stopReason });
  events.emit({
    ...base,
    type: "turn_end",
    inboxId: turn.inboxId,
    stopReason: result.stopReason,
    reply: replyText,
    abortCause: active.abortCause,
    usage,
    ...(result.clientToolCalls && {
      clientToolCalls: result.clientToolCalls.map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      })),
    }),
    ...(result.awaitingApproval && { awaitingApproval: result.awaitingApproval }),
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
}

/**
 * The content of each message of the turn, in order; null when the turn was cut off before the
 * files of one of them were handled (see messageWithFiles): then none of them runs, and after a
 * `/stop` or `/new` all of them are closed.
 */
async function batchContents(
  ctx: TurnContext,
  active: ActiveTurn,
  items: InboxItem[],
): Promise<UserContent[] | null> {
  const contents: UserContent[] = [];
  for (const item of items) {
    const content = item.attachments?.length
      ? await messageWithFiles(ctx, active, item)
      : item.text;
    if (content === null) {
      if (active.abortCause !== "shutdown") {
        for (const other of items) await ctx.store.closeInboxItem(other.id, "done");
      }
      return null;
    }
    contents.push(content);
  }
  return contents;
}

/**
 * The message's content with its files handled (media-input.ts). A newer message interrupting
 * the turn does not cut the downloads short (a photo is often followed at once by its question);
 * a gateway stop, `/stop` or `/new` does, and then this is null: after a stop the message stays
 * pending for the next start; after `/stop` or `/new` it is closed without a turn (`/new` has
 * already moved the session to a fresh transcript, which must not get the old message).
 */
async function messageWithFiles(
  ctx: TurnContext,
  active: ActiveTurn,
  item: InboxItem,
): Promise<UserContent | null> {
  if (!ctx.media) {
    const count = item.attachments?.length ?? 0;
    const note = `[The user sent ${count} file(s) that this gateway cannot fetch.]`;
    return item.text ? `${item.text}\n\n${note}` : note;
  }
  const controller = new AbortController();
  const onAbort = () => {
    if (active.abortCause !== "interrupt") controller.abort();
  };
  active.controller.signal.addEventListener("abort", onAbort, { once: true });
  if (active.controller.signal.aborted) onAbort();
  try {
    const mediaContext = {
      store: ctx.store,
      media: ctx.media,
      logger: ctx.logger,
      crashPoint: ctx.crashPoint,
    };
    const content = await prepareMessageContent(mediaContext, item, controller.signal);
    if (content === null && active.abortCause !== "shutdown") {
      await ctx.store.closeInboxItem(item.id, "done");
    }
    return content;
  } finally {
    active.controller.signal.removeEventListener("abort", onAbort);
    // Notices (a file too large, a transcript echo) go out before the reply.
    ctx.onReplyQueued();
  }
}

/**
 * Loads the transcript and makes it safe to send: tool calls cut off by a crash get an
 * "outcome unknown" result (never silently re-run, unless read-only), and the model is told when
 * it is resuming or when earlier tool results went unanswered. Messages a recorded compaction
 * covers are left out: its summary stands in for them.
 */
async function buildHistory(
  ctx: TurnContext,
  active: ActiveTurn,
  sessionId: string,
  resume: { reason: ResumeReason | null; newInput: boolean; userCount: number } | null,
): Promise<{ history: ChatMessage[]; summary: string | null }> {
  let loaded = await ctx.store.loadTurnHistory(sessionId);
  const cutOff = loaded.unfinished.filter((call) => !ctx.isReadOnlyTool(call.name));
  for (const call of cutOff) {
    await ctx.store.recordToolFinish({
      toolCallId: call.toolCallId,
      sessionId,
      turnId: call.turnId,
      result: UNKNOWN_OUTCOME,
      lease: active.lease ?? undefined,
    });
  }
  // Read again with the results just recorded (only after a crash).
  if (cutOff.length > 0) loaded = await ctx.store.loadTurnHistory(sessionId);
  const { compaction } = loaded;
  const history = normalizeHistory(visibleMessages(loaded.messages, compaction));
  const summary = compaction?.summary ?? null;
  if (resume) {
    const note: ChatMessage = { role: "system", content: resumeNote(resume.reason) };
    return {
      history: withNoteBeforeTail(history, note, {
        keepUserLast: resume.newInput,
        userCount: resume.userCount,
      }),
      summary,
    };
  }
  return { history: withAutoContinueNote(history), summary };
}

function createJournal(
  ctx: TurnContext,
  active: ActiveTurn,
  turnId: number,
  sessionId: string,
  countUsage: (usage: CallUsage | undefined) => void,
  scope: UsageScope,
): TurnJournal {
  return {
    recordMessages: async (messages, usage) => {
      active.agentStarted = true;
      // Steered input taken just before is recorded and its inbox rows closed at once.
      const steered = active.steerTaken.splice(0).map((item) => item.id);
      await ctx.store.appendMessages(
        sessionId,
        turnId,
        messages,
        steered,
        usage && { ...usage, scope },
        active.lease ?? undefined,
      );
      countUsage(usage);
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
        lease: active.lease ?? undefined,
      });
      ctx.crashPoint("after_tool_started");
    },
    recordToolFinish: async (call, output) => {
      ctx.crashPoint("after_tool_ran");
      const to = active.address;
      const sentFile =
        output.sentFile && to && !isDetachedAddress(to)
          ? { ...output.sentFile, sessionKey: active.sessionKey, address: to }
          : undefined;
      await ctx.store.recordToolFinish({
        toolCallId: call.id,
        sessionId,
        turnId,
        result: output.output,
        ...(sentFile && { sentFile }),
        lease: active.lease ?? undefined,
      });
      ctx.crashPoint("after_tool_finished");
      if (sentFile) {
        active.sentFiles.push(sentFile.file);
        ctx.onReplyQueued();
      }
    },
  };
}

/** Hands steered messages to the loop; their inbox rows close when the loop records them. */
function takeSteered(active: ActiveTurn): string[] {
  const items = active.steer.splice(0);
  active.steerTaken.push(...items);
  return items.map((item) => item.text);
}

/** The address a turn's reply goes to: the message's chat, or the session's origin on resume. */
export function replyAddress(
  active: Pick<ActiveTurn, "work">,
  origin: ChatAddress | null,
): ChatAddress | null {
  const work = active.work;
  // A batch answers its latest message.
  if (work.kind === "message") return (work.joined?.at(-1) ?? work.item).address;
  if (work.kind === "retry") return work.address;
  return origin;
}

/**
 * The API answers in its HTTP response, which carries no files: a reply there links each file the
 * turn sent (`GET /files/<id>`, authenticated like the API).
 */
function withFileLinks(address: ChatAddress, text: string, files: OutboundFile[]): string {
  if (address.platform !== "api" || files.length === 0) return text;
  const links = files.map((f) => `[${f.name.replace(/[[\]]/g, "")}](/files/${f.id})`);
  return `${text}\n\n${links.join("\n")}`;
}

/**
 * The reply as it goes out: a scheduled run's carries the job's name, a task's child sends only
 * its approval questions (its result is the task's to deliver); null: nothing is sent.
 */
function outgoingText(
  ctx: TurnContext,
  active: ActiveTurn,
  text: string,
  awaitingApproval: boolean,
): string | null {
  if (ctx.tasks?.isChild(active.sessionKey)) {
    return ctx.tasks.childReply(active.sessionKey, text, awaitingApproval);
  }
  return labelled(active.work, text);
}

/** A scheduled run's reply carries the job's name; every other reply is sent as written. */
function labelled(work: ActiveTurn["work"], text: string): string {
  return work.kind === "message" && isScheduledFire(work.item)
    ? labelScheduledReply(work.item.chatId, text)
    : text;
}
