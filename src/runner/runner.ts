/**
 * The runner owns sessions and turns: it commits every inbound message to the inbox, answers
 * chat commands, runs one turn at a time per session key (sessions in parallel up to a cap),
 * applies the busy-input mode, and refuses new work while the gateway stops or drains.
 */
import { setTimeout as delay } from "node:timers/promises";
import type {
  AcceptResult,
  ApprovalPress,
  ApprovalPressResult,
  InboundMessage,
  InboundSink,
  Refusal,
} from "../contract/platform.js";
import type { InboxItem, LeaseToken, ScheduleAdvance, SessionRecord } from "../sessions/store.js";
import {
  type Admission,
  type ChatCommand,
  type ChatCommandHost,
  type ExtraChatCommand,
  type GatewayControl,
  handleChatCommand,
  parseChatCommand,
  SESSION_COMMANDS,
} from "./chat-commands.js";
import { CutOffSessions } from "./cut-off.js";
import { EventFanout, type RunnerEventListener } from "./events.js";
import { type Freshness, isStale, startAfresh } from "./fresh-start.js";
import {
  type AbortCause,
  type ActiveTurn,
  createActiveTurn,
  holdsMessage,
  type Lane,
  type Work,
} from "./lane.js";
import { takeBatch } from "./lane-batch.js";
import { Replies } from "./replies.js";
import { runWork, type WorkHost } from "./run-work.js";
import type { ActiveTurnInfo, RunnerOptions } from "./runner-options.js";
import { isInternalInput, isScheduledFire } from "./scheduled-input.js";
import { holdingLease } from "./session-lease.js";
import { type StoreRetryHost, whenStoreAnswers } from "./store-retry.js";
import { TEXT } from "./texts.js";

export type { BusyInputMode } from "./runner-options.js";
export type { ActiveTurnInfo, Admission, ExtraChatCommand, GatewayControl, RunnerOptions };

export class Runner implements InboundSink {
  private readonly lanes = new Map<string, Lane>();
  private readonly events = new EventFanout();
  private readonly now: () => number;
  private running = 0;
  private admission: Admission = "open";
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private intakeHeld = false;
  /** Scheduled fires that came while draining: they stay pending and run when the drain ends. */
  private heldForDrain: InboxItem[] = [];
  /** Inbox ids dispatched by `receive` while `dispatchOpenInbox` runs (so it skips them). */
  private startupDispatched: Set<number> | null = null;
  /**
   * Messages being received per session key (stored, not yet queued): an idle lane waits for
   * them before it starts, so that messages arriving together (a platform's batch of updates)
   * are one turn (lane-batch.ts).
   */
  private readonly arriving = new Map<string, number>();
  /** True while `dispatchOpenInbox` queues the backlog: nothing starts until all of it is queued. */
  private holdStarts = false;

  private readonly cutOff: CutOffSessions;
  private readonly replies: Replies;
  private readonly storeRetry: StoreRetryHost;

  constructor(private readonly options: RunnerOptions) {
    this.now = options.now ?? Date.now;
    this.storeRetry = {
      failure: () => options.store.failure(),
      ttlMs: options.sessionLeases?.ttlMs,
      open: () => this.admission === "open",
    };
    this.cutOff = new CutOffSessions({ ...options, pump: () => this.pump() });
    this.replies = new Replies(options, this.events);
  }

  /** See CutOffSessions.onStoreBack. */
  onStoreBack(listener: () => void): void {
    this.cutOff.onStoreBack(listener);
  }

  onEvent(listener: RunnerEventListener): () => void {
    return this.events.subscribe(listener);
  }

  /**
   * Commits the message to the inbox, then handles it in the background, and settles once the
   * commit is on disk: the caller acknowledges the message then, while its turn has already
   * begun (its first write that waits for the disk covers this commit too). While intake is held
   * (gateway start-up), the message is only stored: `dispatchOpenInbox` picks it up. A scheduled
   * fire comes with its job's `advance`, committed in the same transaction as the inbox row.
   */
  async receive(message: InboundMessage, advance?: ScheduleAdvance): Promise<AcceptResult> {
    const key = message.sessionKey;
    this.arriving.set(key, (this.arriving.get(key) ?? 0) + 1);
    let dispatching = false;
    try {
      const { accepted, item, onDisk } = await this.options.store.commitInbound(message, advance);
      this.options.crashPoint("after_inbox_commit");
      if (accepted && !this.intakeHeld) {
        this.startupDispatched?.add(item.id);
        dispatching = true;
        this.dispatch(item, message.backlog === true)
          .catch((err: unknown) => {
            this.logFailure(err, item);
            this.retryWhenStoreAnswers(item);
          })
          .finally(() => this.arrived(key));
      }
      await onDisk;
      return { accepted, inboxId: item.id, sessionId: item.sessionId };
    } finally {
      if (!dispatching) this.arrived(key);
    }
  }

  /** See InboundSink.receiveAll: every key is held until the last message is stored. */
  async receiveAll(messages: InboundMessage[]): Promise<AcceptResult[]> {
    const keys = messages.map((m) => m.sessionKey);
    for (const key of keys) this.arriving.set(key, (this.arriving.get(key) ?? 0) + 1);
    try {
      const results: AcceptResult[] = [];
      for (const message of messages) results.push(await this.receive(message));
      return results;
    } finally {
      for (const key of keys) this.arrived(key);
    }
  }

  /** A received message is queued, answered or dropped: its lane may start once none is left. */
  private arrived(key: string): void {
    const left = (this.arriving.get(key) ?? 1) - 1;
    if (left > 0) {
      this.arriving.set(key, left);
      return;
    }
    this.arriving.delete(key);
    if (this.lanes.has(key)) this.pump();
  }

  /**
   * Stores incoming messages without dispatching them until `dispatchOpenInbox`: at start-up,
   * resumes must be queued before new messages, and nothing may be dispatched twice.
   */
  holdIntake(): void {
    this.intakeHeld = true;
  }

  /**
   * Dispatches the inbox items left open by a previous process or stored while intake was held,
   * each once, in order, and opens intake. `open` says which items are this gateway's to run
   * (several gateways: its own and those of gateways that died); default: every open item.
   */
  async dispatchOpenInbox(
    open: () => Promise<InboxItem[]> = () => this.options.store.listOpenInbox(),
  ): Promise<number> {
    this.intakeHeld = false;
    this.startupDispatched = new Set();
    // The whole backlog is queued before any of it starts: a chat's waiting messages are one turn.
    this.holdStarts = true;
    try {
      const items = await open();
      let count = 0;
      for (const item of items) {
        if (this.startupDispatched.has(item.id)) continue;
        await this.dispatch(item, true);
        count += 1;
      }
      return count;
    } finally {
      this.startupDispatched = null;
      this.holdStarts = false;
      this.pump();
    }
  }

  /** Why new work would be refused now; chat commands are always handled (InboundSink). */
  refusalFor(text: string): Refusal | null {
    if (parseChatCommand(text)) return null;
    if (this.admission !== "open") return this.admission;
    if (this.draining) return "draining";
    if (!this.options.agent) return "no_model";
    return null;
  }

  /** An approval button was pressed (InboundSink): decided once, in the store. */
  answerApproval(press: ApprovalPress): Promise<ApprovalPressResult> {
    const approvals = this.options.approvals;
    if (!approvals) return Promise.resolve({ toast: "Approvals are off.", cardText: null });
    return approvals.press(press);
  }

  /**
   * Queues the turn that applies an approval's answer to its session (an internal event, like a
   * resume: it runs while draining). One queued continuation covers every answer of the session.
   */
  continueAfterApproval(
    sessionKey: string,
    sessionId: string,
    requester: string | null,
    asker: string | null,
  ): void {
    const lane = this.lanes.get(sessionKey);
    if (lane?.queue.some((w) => w.kind === "continue" && w.sessionId === sessionId)) return;
    this.enqueue(sessionKey, { kind: "continue", sessionId, requester, asker }, false);
  }

  /** Queues the turn that acts on the answer to a budget pause (an internal event, like a resume). */
  continueAfterBudget(sessionKey: string, sessionId: string, requester: string | null): void {
    const lane = this.lanes.get(sessionKey);
    if (lane?.queue.some((w) => w.kind === "continue" && w.sessionId === sessionId)) return;
    const work: Work = { kind: "continue", sessionId, requester, asker: null, budget: true };
    this.enqueue(sessionKey, work, false);
  }

  /** Queues a synthetic turn that continues an interrupted session (an internal event: allowed while draining). */
  resume(session: SessionRecord): void {
    this.cutOff.delete(session.key);
    this.enqueue(session.key, { kind: "resume", session }, true);
  }

  setAdmission(admission: Admission): void {
    this.admission = admission;
  }

  setDraining(draining: boolean): void {
    this.draining = draining;
    if (draining) return;
    for (const item of this.heldForDrain.splice(0)) {
      this.dispatch(item, true).catch((err: unknown) => this.logFailure(err, item));
    }
  }

  isDraining(): boolean {
    return this.draining;
  }

  activeTurns(): ActiveTurnInfo[] {
    return [...this.lanes.values()].flatMap(({ active: a }) =>
      a
        ? [
            {
              sessionKey: a.sessionKey,
              sessionId: a.sessionId,
              address: a.address,
              startedAt: a.startedAt,
              agentStarted: a.agentStarted,
              currentTool: a.currentTool,
            },
          ]
        : [],
    );
  }

  /**
   * Ends a session's work here (a task cancelled or timed out): its queued work is dropped and
   * its running turn interrupted, journaled as any interruption.
   */
  stopSession(sessionKey: string): void {
    const lane = this.lanes.get(sessionKey);
    if (!lane) return;
    lane.queue = [];
    if (lane.active) this.abort(lane.active, "interrupt");
  }

  /** Aborts every running turn (gateway stop). Queued work stays in the inbox for the next start. */
  interruptAll(cause: AbortCause = "shutdown"): void {
    for (const lane of this.lanes.values()) {
      lane.queue = [];
      if (lane.active) this.abort(lane.active, cause);
    }
  }

  /** Resolves true once no turn runs, or false after `timeoutMs`. */
  waitForIdle(timeoutMs: number): Promise<boolean> {
    if (this.running === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.idleWaiters = this.idleWaiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.idleWaiters.push(done);
    });
  }

  /**
   * Handles one stored message. A `backlog` message (left open by a previous process, e.g. sent
   * while the gateway was down) waits its turn behind earlier ones instead of interrupting them.
   */
  private async dispatch(item: InboxItem, backlog = false): Promise<void> {
    const command = parseChatCommand(item.text);
    if (command) {
      await this.command(item, command);
      return;
    }
    if (isInternalInput(item) && (this.admission !== "open" || this.draining)) {
      // Not started now, not refused either: after a drain it runs here, after a stop in the
      // next process (it stays pending in the inbox).
      if (this.admission === "open") this.heldForDrain.push(item);
      return;
    }
    const lane = this.lanes.get(item.sessionKey);
    const busy = Boolean(lane?.active);
    const refusal = this.refusalFor(item.text);
    if (refusal === "stopping" || refusal === "restarting") {
      await this.replies.refuseWhileStopping(item, busy, refusal);
      return;
    }
    if (refusal === "draining") {
      await this.replies.refuse(item, refusal);
      return;
    }
    if (refusal === "no_model") {
      await this.replies.answer(item, TEXT.noModel, "done");
      this.replies.emitRefused(item, refusal);
      return;
    }
    // Over a sender's rate: it waits in the inbox and comes back here when the window allows.
    const release = (next: InboxItem) =>
      void this.dispatch(next).catch((err: unknown) => this.logFailure(err, next));
    if (this.options.senderLimits?.hold(item, release)) return;
    const session = await this.options.store.getSession(item.sessionKey);
    const reset =
      session !== null &&
      !this.lanes.get(item.sessionKey)?.active &&
      (await startAfresh(this.freshness(), item, session));
    // A request an interruption left unanswered (e.g. held back by the restart-loop breaker) runs
    // first, as its own turn with its own reply, in `queue` and `steer` modes; in `interrupt`
    // mode the new message's turn carries it, with a note for the model (turn.ts).
    const resumeFirst =
      !reset && session?.resumePending === true && this.options.busyInputMode !== "interrupt";
    if (resumeFirst && !this.resumeQueued(item.sessionKey)) {
      this.enqueue(item.sessionKey, { kind: "resume", session }, false);
    }
    const active = this.lanes.get(item.sessionKey)?.active;
    if (active && !backlog && !isScheduledFire(item)) {
      await this.applyBusyMode(active, item);
      return;
    }
    this.enqueue(item.sessionKey, { kind: "message", item }, false);
    if (resumeFirst && !backlog)
      await this.replies.notice(item.sessionKey, item.address, TEXT.queued);
  }

  /**
   * Handles a chat command. With several gateways, one that changes the session acts under the
   * session's lease unless a turn of this gateway holds it already: it waits for a turn another
   * gateway runs to end (as a turn would), in the background, holding back this gateway's work
   * queued behind it meanwhile, so the order of a chat's messages stays.
   */
  private async command(item: InboxItem, command: ChatCommand): Promise<void> {
    const leases = this.options.sessionLeases;
    const active = this.lanes.get(item.sessionKey)?.active ?? null;
    // `/stop` of a turn of this gateway still waiting for the session: it is stopped here.
    const local = active?.lease || (active && command.name === "stop");
    if (!leases || !SESSION_COMMANDS.has(command.name) || local) {
      await handleChatCommand(this.commandHost(), item, command);
      return;
    }
    const lane = this.laneFor(item.sessionKey);
    lane.commands = (lane.commands ?? 0) + 1;
    const run = (lane.commandChain ?? Promise.resolve())
      .then(() => this.commandUnderLease(item, command, leases))
      .catch((err: unknown) => this.logFailure(err, item))
      .finally(() => {
        lane.commands = (lane.commands ?? 1) - 1;
        if (lane.commandChain === run) lane.commandChain = null;
        if (!lane.active && lane.queue.length === 0 && !lane.commands) {
          this.lanes.delete(item.sessionKey);
        }
        this.pump();
      });
    lane.commandChain = run;
  }

  /**
   * Claims the session's lease under a name of this gateway's commands (so no turn of this
   * gateway runs while it acts, nor a command of another), keeps it while the command acts, and
   * gives it up. `/stop` does not wait: when another gateway holds the session, it says so. A
   * command still waiting when the gateway stops stays pending in the inbox for the next start.
   */
  private async commandUnderLease(
    item: InboxItem,
    command: ChatCommand,
    { owner, ttlMs }: { owner: string; ttlMs: number },
  ): Promise<void> {
    const { store } = this.options;
    let lease: LeaseToken | null = null;
    for (;;) {
      if (this.admission !== "open") return;
      lease = await store.claimSessionLease(item.sessionKey, `${owner}:command`, ttlMs);
      if (lease || command.name === "stop") break;
      await delay(Math.min(ttlMs / 3, 500));
    }
    if (!lease) {
      await this.replies.answer(item, TEXT.stopElsewhere, "done");
      return;
    }
    await holdingLease(store, this.options.logger, lease, ttlMs, () =>
      handleChatCommand(this.commandHost(), item, command),
    );
  }

  private laneFor(sessionKey: string): Lane {
    let lane = this.lanes.get(sessionKey);
    if (!lane) {
      lane = { active: null, queue: [] };
      this.lanes.set(sessionKey, lane);
    }
    return lane;
  }

  /** True when a resume of the session is running or waiting in its lane. */
  private resumeQueued(sessionKey: string): boolean {
    const lane = this.lanes.get(sessionKey);
    if (!lane) return false;
    return lane.active?.work.kind === "resume" || lane.queue.some((w) => w.kind === "resume");
  }

  /**
   * `/retry` in a session whose interrupted request waits for its resume (held back by the
   * restart-loop breaker): continues it now, ahead of queued messages. False when the request is
   * too old to continue (then `/retry` runs the last message again instead).
   */
  resumeNow(session: SessionRecord): boolean {
    if (!session.resumePending || session.suspended || isStale(session, this.freshness()))
      return false;
    if (!this.resumeQueued(session.key))
      this.enqueue(session.key, { kind: "resume", session }, true);
    return true;
  }

  private async applyBusyMode(active: ActiveTurn, item: InboxItem): Promise<void> {
    const mode = this.options.busyInputMode;
    // A running resume answers the interrupted request on its own: steering falls back to queue.
    // Files need their own turn to be fetched: a message with files is queued instead.
    if (mode === "steer" && active.work.kind !== "resume" && !item.attachments?.length) {
      active.steer.push(item);
      return;
    }
    if (mode === "queue" || mode === "steer") {
      // Came while a turn ran: it gets a turn of its own, not a share of a batch.
      this.enqueue(item.sessionKey, { kind: "message", item, together: false }, false);
      await this.replies.notice(item.sessionKey, item.address, TEXT.queued);
      return;
    }
    this.enqueue(item.sessionKey, { kind: "message", item }, false);
    this.abort(active, "interrupt");
  }

  private enqueue(sessionKey: string, work: Work, front: boolean): void {
    const lane = this.laneFor(sessionKey);
    if (front) lane.queue.unshift(work);
    else lane.queue.push(work);
    this.pump();
  }

  /**
   * Starts queued work on idle lanes while there is a free slot; nothing new once stopping. A
   * message starts together with the messages waiting behind it (lane-batch.ts); a lane with
   * messages still arriving waits for them.
   */
  private pump(): void {
    if (this.admission !== "open" || this.holdStarts) return;
    for (const [key, lane] of this.lanes) {
      // A task's child runs even when its parent holds a slot waiting for it (no deadlock).
      const capped = !this.options.tasks?.isChild(key);
      if (capped && this.running >= this.options.maxConcurrentTurns) continue;
      if (lane.active || lane.queue.length === 0 || lane.commands || this.arriving.has(key))
        continue;
      // A cut-off turn's resume runs before anything else queued in its session.
      if (this.cutOff.has(key) && lane.queue[0]!.kind !== "resume") continue;
      const work = takeBatch(lane.queue.shift()!, lane.queue, (item) => this.answersInBand(item));
      this.start(key, lane, work);
    }
  }

  /** The API answers each request in its own HTTP response: its messages are never batched. */
  private answersInBand(item: InboxItem): boolean {
    return this.options.repliesInBand?.(item.address) ?? false;
  }

  private start(sessionKey: string, lane: Lane, work: Work): void {
    this.running += 1;
    this.options.onActiveTurnsChange?.(this.running);
    const active = createActiveTurn(sessionKey, work, this.now());
    lane.active = active;
    active.done = runWork(this.workHost(), active).finally(() =>
      this.finish(sessionKey, lane, active),
    );
  }

  /** A message whose handling or turn could not start while the store did not answer. */
  private retryWhenStoreAnswers(item: InboxItem): void {
    whenStoreAnswers(this.storeRetry, () => {
      // A dispatch that failed after queueing the message (its "Queued" notice) left it queued.
      if (holdsMessage(this.lanes.values(), item.id)) return;
      this.dispatch(item, true).catch((err: unknown) => {
        this.logFailure(err, item);
        this.retryWhenStoreAnswers(item);
      });
    });
  }

  /**
   * The same for work without a message (a resume, an approval's continuation, a `/retry`): its
   * own checks make it moot if the session moved on meanwhile.
   */
  private requeueWhenStoreAnswers(sessionKey: string, work: Work): void {
    whenStoreAnswers(this.storeRetry, () => {
      const queued = this.lanes.get(sessionKey)?.queue ?? [];
      if (work.kind === "resume" && queued.some((w) => w.kind === "resume")) return;
      this.enqueue(sessionKey, work, work.kind === "resume");
    });
  }

  private finish(sessionKey: string, lane: Lane, active: ActiveTurn): void {
    this.running -= 1;
    this.options.onActiveTurnsChange?.(this.running);
    if (lane.active === active) lane.active = null;
    // Steered messages the turn never took get their own turn next.
    // (and those taken but never recorded, e.g. when the turn was aborted in between).
    const untaken = [...active.steerTaken, ...active.steer];
    lane.queue.unshift(...untaken.map((item): Work => ({ kind: "message", item })));
    if (!lane.active && lane.queue.length === 0 && !lane.commands) this.lanes.delete(sessionKey);
    if (this.running === 0) for (const w of this.idleWaiters.splice(0)) w();
    if (this.admission === "open") this.pump();
  }

  private abort(active: ActiveTurn, cause: AbortCause): void {
    if (active.controller.signal.aborted) return;
    active.abortCause = cause;
    active.controller.abort(new Error(`turn ${cause}`));
  }

  private freshness(): Freshness {
    return {
      store: this.options.store,
      replies: this.replies,
      windowMs: this.options.autoResumeFreshnessMs,
      now: this.now(),
    };
  }

  private workHost(): WorkHost {
    return {
      options: this.options,
      events: this.events,
      cutOff: this.cutOff,
      replies: this.replies,
      logFailure: (err, item) => this.logFailure(err, item),
      retryWhenStoreAnswers: (item) => this.retryWhenStoreAnswers(item),
      requeueWhenStoreAnswers: (key, work) => this.requeueWhenStoreAnswers(key, work),
    };
  }

  private commandHost(): ChatCommandHost {
    return {
      store: this.options.store,
      control: this.options.control,
      laneOf: (key) => this.lanes.get(key)?.active ?? null,
      stopTurn: (active, cause) => this.abort(active, cause),
      retry: (sessionKey, text, address) =>
        this.enqueue(sessionKey, { kind: "retry", sessionKey, text, address }, false),
      resumeNow: (session) => this.resumeNow(session),
      answer: (item, text) => this.replies.answer(item, text, "done"),
      refuse: (item) =>
        this.replies.refuse(item, this.admission === "open" ? "draining" : this.admission),
      admission: () => this.admission,
      draining: () => this.draining,
      extraCommand: (name) => this.options.extraCommands?.[name] ?? null,
      statusLines: () => this.options.statusLines?.() ?? [],
      modelStatusLines: (item) => this.options.modelStatusLines?.(item) ?? Promise.resolve([]),
    };
  }

  private logFailure(err: unknown, item: InboxItem | null): void {
    this.options.logger.error(
      { err, inboxId: item?.id, session: item?.sessionKey },
      "message handling failed",
    );
  }
}
