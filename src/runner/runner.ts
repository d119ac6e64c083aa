/**
 * The runner owns sessions and turns: it commits every inbound message to the inbox, answers
 * chat commands, runs one turn at a time per session key (sessions in parallel up to a cap),
 * applies the busy-input mode, and refuses new work while the gateway stops or drains.
 */
import type { Logger } from "pino";
import type { BUSY_INPUT_MODES } from "../config/schema.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type {
  AcceptResult,
  ChatAddress,
  InboundMessage,
  InboundSink,
} from "../platforms/platform.js";
import type { InboxItem, SessionRecord, Store } from "../sessions/store.js";
import type { AgentRun, IsReadOnlyTool } from "./agent-run.js";
import { type ChatCommandHost, handleChatCommand, parseChatCommand } from "./chat-commands.js";
import { EventFanout, type RunnerEventListener } from "./events.js";
import {
  type AbortCause,
  type ActiveTurn,
  createActiveTurn,
  type Lane,
  type Work,
} from "./lane.js";
import {
  DRAIN_REFUSAL,
  notAcceptingText,
  queuedForAfterRestartText,
  SUSPENDED_NOTICE,
} from "./lifecycle-texts.js";
import { TEXT } from "./texts.js";
import { executeTurn, replyAddress } from "./turn.js";

export type BusyInputMode = (typeof BUSY_INPUT_MODES)[number];
/** `open`: normal; `restarting`/`stopping`: the stop sequence closed admission. */
export type Admission = "open" | "restarting" | "stopping";

/** Gateway-level actions a chat command may ask for. */
export interface GatewayControl {
  /** Starts a restart (idempotent); returns the text to answer the `/restart` with, if any. */
  requestRestart(from: { address: ChatAddress; messageId: string }): Promise<string | null>;
  /** Makes `address` the platform's home channel. */
  setHomeChannel(address: ChatAddress): Promise<void>;
}

export interface RunnerOptions {
  store: Store;
  /** Null when no model is configured: messages are answered with how to configure one. */
  agent: AgentRun | null;
  isReadOnlyTool: IsReadOnlyTool;
  busyInputMode: BusyInputMode;
  maxConcurrentTurns: number;
  /** How long an interrupted session may continue where it left off (auto_resume_freshness). */
  autoResumeFreshnessMs: number;
  logger: Logger;
  control: GatewayControl;
  /** Wakes the outbox dispatcher. */
  onReplyQueued(): void;
  showTyping?(address: ChatAddress): () => void;
  /** Told the number of running turns whenever it changes. */
  onActiveTurnsChange?(count: number): void;
  crashPoint: CrashPoint;
  now?: () => number;
}

/** A running turn as reported by status and used by the stop sequence. */
export interface ActiveTurnInfo {
  sessionKey: string;
  sessionId: string;
  address: ChatAddress | null;
  startedAt: number;
  agentStarted: boolean;
  currentTool: string | null;
}

export class Runner implements InboundSink {
  private readonly lanes = new Map<string, Lane>();
  private readonly events = new EventFanout();
  private readonly now: () => number;
  private running = 0;
  private admission: Admission = "open";
  private draining = false;
  private idleWaiters: (() => void)[] = [];
  private intakeHeld = false;
  /** Inbox ids dispatched by `receive` while `dispatchOpenInbox` runs (so it skips them). */
  private startupDispatched: Set<number> | null = null;

  constructor(private readonly options: RunnerOptions) {
    this.now = options.now ?? Date.now;
  }

  onEvent(listener: RunnerEventListener): () => void {
    return this.events.subscribe(listener);
  }

  /**
   * Commits the message to the inbox, then handles it in the background. While intake is held
   * (gateway start-up), the message is only stored: `dispatchOpenInbox` picks it up.
   */
  async receive(message: InboundMessage): Promise<AcceptResult> {
    const { accepted, item } = await this.options.store.acceptInbound(message);
    this.options.crashPoint("after_inbox_commit");
    if (accepted && !this.intakeHeld) {
      this.startupDispatched?.add(item.id);
      this.dispatch(item).catch((err: unknown) => this.logFailure(err, item));
    }
    return { accepted, inboxId: item.id, sessionId: item.sessionId };
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
   * each once, in order, and opens intake.
   */
  async dispatchOpenInbox(): Promise<number> {
    this.intakeHeld = false;
    this.startupDispatched = new Set();
    try {
      const items = await this.options.store.listOpenInbox();
      let count = 0;
      for (const item of items) {
        if (this.startupDispatched.has(item.id)) continue;
        await this.dispatch(item, true);
        count += 1;
      }
      return count;
    } finally {
      this.startupDispatched = null;
    }
  }

  /** Queues a synthetic turn that continues an interrupted session (an internal event: allowed while draining). */
  resume(session: SessionRecord): void {
    this.enqueue(session.key, { kind: "resume", session }, true);
  }

  setAdmission(admission: Admission): void {
    this.admission = admission;
  }

  setDraining(draining: boolean): void {
    this.draining = draining;
  }

  isDraining(): boolean {
    return this.draining;
  }

  activeTurns(): ActiveTurnInfo[] {
    const out: ActiveTurnInfo[] = [];
    for (const lane of this.lanes.values()) {
      const a = lane.active;
      if (!a) continue;
      out.push({
        sessionKey: a.sessionKey,
        sessionId: a.sessionId,
        address: a.address,
        startedAt: a.startedAt,
        agentStarted: a.agentStarted,
        currentTool: a.currentTool,
      });
    }
    return out;
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
      await handleChatCommand(this.commandHost(), item, command);
      return;
    }
    const lane = this.lanes.get(item.sessionKey);
    const busy = Boolean(lane?.active);
    if (this.admission !== "open") {
      await this.refuseWhileStopping(item, busy);
      return;
    }
    if (this.draining) {
      await this.answer(item, DRAIN_REFUSAL, "cancelled");
      return;
    }
    if (!this.options.agent) {
      await this.answer(item, TEXT.noModel, "done");
      return;
    }
    const freshStart = await this.freshStartNotice(item);
    if (freshStart) await this.notice(item.sessionKey, item.address, freshStart);
    if (busy && lane?.active && !backlog) {
      await this.applyBusyMode(lane.active, item);
      return;
    }
    this.enqueue(item.sessionKey, { kind: "message", item }, false);
  }

  /**
   * A suspended session, or one whose interruption is older than the freshness window, starts
   * a fresh transcript on its next message; returns the notice to send, or null. A fresh
   * resume-pending session keeps its transcript (its mark clears when the turn succeeds).
   */
  private async freshStartNotice(item: InboxItem): Promise<string | null> {
    const session = await this.options.store.getSession(item.sessionKey);
    if (!session || this.lanes.get(item.sessionKey)?.active) return null;
    const markedAt = session.resumeMarkedAt ?? session.updatedAt;
    const stale =
      session.resumePending && this.now() - markedAt > this.options.autoResumeFreshnessMs;
    if (!session.suspended && !stale) return null;
    await this.options.store.resetSession(item.sessionKey);
    return session.suspended ? SUSPENDED_NOTICE : TEXT.stale;
  }

  private async applyBusyMode(active: ActiveTurn, item: InboxItem): Promise<void> {
    const mode = this.options.busyInputMode;
    if (mode === "steer") {
      active.steer.push(item);
      return;
    }
    if (mode === "queue") {
      this.enqueue(item.sessionKey, { kind: "message", item }, false);
      await this.notice(item.sessionKey, item.address, TEXT.queued);
      return;
    }
    this.enqueue(item.sessionKey, { kind: "message", item }, false);
    this.abort(active, "interrupt");
  }

  private async refuseWhileStopping(item: InboxItem, busy: boolean): Promise<void> {
    const restarting = this.admission === "restarting";
    if (busy && this.options.busyInputMode === "queue") {
      // Stays `pending` in the inbox: the next process runs it after the resume.
      await this.notice(item.sessionKey, item.address, queuedForAfterRestartText(restarting));
      return;
    }
    await this.answer(item, notAcceptingText(restarting), "cancelled");
  }

  private enqueue(sessionKey: string, work: Work, front: boolean): void {
    let lane = this.lanes.get(sessionKey);
    if (!lane) {
      lane = { active: null, queue: [] };
      this.lanes.set(sessionKey, lane);
    }
    if (front) lane.queue.unshift(work);
    else lane.queue.push(work);
    this.pump();
  }

  /** Starts queued work on idle lanes while there is a free slot; nothing new once stopping. */
  private pump(): void {
    if (this.admission !== "open") return;
    for (const [key, lane] of this.lanes) {
      if (this.running >= this.options.maxConcurrentTurns) return;
      if (lane.active || lane.queue.length === 0) continue;
      this.start(key, lane, lane.queue.shift()!);
    }
  }

  private start(sessionKey: string, lane: Lane, work: Work): void {
    this.running += 1;
    this.options.onActiveTurnsChange?.(this.running);
    const active = createActiveTurn(sessionKey, work, this.now());
    lane.active = active;
    active.done = this.run(active).finally(() => this.finish(sessionKey, lane, active));
  }

  /** Runs one piece of work; never rejects (a failure is logged and reported to listeners). */
  private async run(active: ActiveTurn): Promise<void> {
    const item = active.work.kind === "message" ? active.work.item : null;
    try {
      const session = await this.options.store.getSession(active.sessionKey);
      active.address = replyAddress(active, session?.origin ?? null);
      // A resume is moot once a newer turn has continued the session (its mark is gone).
      if (active.work.kind === "resume" && (!active.address || !session?.resumePending)) return;
      const stopTyping = active.address ? this.options.showTyping?.(active.address) : undefined;
      try {
        await executeTurn(this.turnContext(), active);
      } finally {
        stopTyping?.();
      }
      if (active.abortCause === "user_stop" && active.address) {
        await this.notice(active.sessionKey, active.address, TEXT.stopped);
      }
    } catch (err) {
      // Typically the store failing (disk full): the turn stays `running` in the record and is
      // recovered at the next start. Waiting clients must not hang meanwhile.
      this.logFailure(err, item);
      this.events.emit({
        sessionKey: active.sessionKey,
        sessionId: active.sessionId,
        turnId: active.turnId ?? -1,
        type: "turn_end",
        inboxId: item?.id ?? null,
        stopReason: "error",
        reply: "Keel could not record this turn; it will be retried after the gateway restarts.",
      });
    }
  }

  private finish(sessionKey: string, lane: Lane, active: ActiveTurn): void {
    this.running -= 1;
    this.options.onActiveTurnsChange?.(this.running);
    if (lane.active === active) lane.active = null;
    // Steered messages the turn never took get their own turn next.
    // (and those taken but never recorded, e.g. when the turn was aborted in between).
    const untaken = [...active.steerTaken, ...active.steer];
    lane.queue.unshift(...untaken.map((item): Work => ({ kind: "message", item })));
    if (!lane.active && lane.queue.length === 0) this.lanes.delete(sessionKey);
    if (this.running === 0) for (const w of this.idleWaiters.splice(0)) w();
    if (this.admission === "open") this.pump();
  }

  private abort(active: ActiveTurn, cause: AbortCause): void {
    if (active.controller.signal.aborted) return;
    active.abortCause = cause;
    active.controller.abort(new Error(`turn ${cause}`));
  }

  private turnContext() {
    const { store, agent, isReadOnlyTool, logger, crashPoint, onReplyQueued } = this.options;
    return {
      store,
      agent: agent!,
      isReadOnlyTool,
      events: this.events,
      logger,
      crashPoint,
      onReplyQueued,
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
      answer: (item, text) => this.answer(item, text, "done"),
      refuse: (item) =>
        this.admission !== "open"
          ? this.answer(item, notAcceptingText(this.admission === "restarting"), "cancelled")
          : this.answer(item, DRAIN_REFUSAL, "cancelled"),
      admission: () => this.admission,
      draining: () => this.draining,
    };
  }

  /** Replies to an inbox item with a notice and closes it. */
  private async answer(item: InboxItem, text: string, state: "done" | "cancelled"): Promise<void> {
    await this.options.store.closeInboxItem(item.id, state, text);
    this.options.onReplyQueued();
  }

  private async notice(sessionKey: string, address: ChatAddress, text: string): Promise<void> {
    const session = await this.options.store.ensureSession(sessionKey, address);
    await this.options.store.enqueueOutbox({
      sessionKey,
      sessionId: session.sessionId,
      address,
      text,
      kind: "notice",
    });
    this.options.onReplyQueued();
  }

  private logFailure(err: unknown, item: InboxItem | null): void {
    this.options.logger.error(
      { err, inboxId: item?.id, session: item?.sessionKey },
      "message handling failed",
    );
  }
}
