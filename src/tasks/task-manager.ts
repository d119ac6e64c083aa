/**
 * Tasks: work a chat (`/bg`) or a turn (`delegate`) hands to a child session. A task is a row
 * in the store plus ordinary work of the runner: its child session starts from one inbox row
 * (platform `task`, chat = the task id) and runs journaled turns like any chat, so a crash
 * leaves it where any turn would be (pending, resume-pending, outcome-unknown tool calls). This
 * class decides when a task starts (per chat at most `tasks.max_concurrent` in the background,
 * in order), notices when its child has finished (a turn's end, or the record at start-up), and
 * ends it once in the store, with its result's delivery in the same transaction.
 */
import type { Logger } from "pino";
import type { ChatMessage } from "../agent/types.js";
import type { AcceptResult, ChatAddress, InboundMessage } from "../contract/platform.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { TurnTaskHooks } from "../runner/agent-run.js";
import { TASK_PLATFORM } from "../runner/scheduled-input.js";
import type { SessionStore, TaskEnd, TaskRecord, TaskStore, TurnStore } from "../sessions/store.js";
import { childPrompt, TASK_TEXT, taskNote } from "./task-texts.js";

const CHILD_KEY = /^agent:main:task:(\d+)$/;

/** The task id of a child session key, or null for any other session. */
export function taskIdOfSession(sessionKey: string): number | null {
  const match = CHILD_KEY.exec(sessionKey);
  return match ? Number(match[1]) : null;
}

export interface TaskLimits {
  maxAgeMs: number;
  maxDepth: number;
  maxConcurrent: number;
  timeoutMs: number;
}

export interface TasksOptions {
  store: TaskStore & SessionStore & TurnStore;
  /** Commits a child's first message to the inbox and dispatches it (the runner's `receive`). */
  intake(message: InboundMessage): Promise<AcceptResult>;
  /** Drops a child's queued work and interrupts its running turn (the runner's `stopSession`). */
  stopSession(sessionKey: string): void;
  /** A notice was queued in the outbox (wakes the dispatcher). */
  onNoticeQueued(): void;
  limits: TaskLimits;
  crashPoint?: CrashPoint;
  logger: Logger;
  now: () => number;
  /** How often tasks ended outside this process (`keel tasks cancel`) are looked for. */
  pollMs?: number;
}

export interface TaskRequest {
  parentSessionKey: string;
  parentSessionId: string;
  /** The `delegate` call (one task per call, even when re-run), `bg:<inbox id>` for `/bg`. */
  requestId: string;
  chat: ChatAddress;
  requester: string | null;
  prompt: string;
  context: string | null;
  background: boolean;
}

export type TaskCreated =
  | { ok: true; task: TaskRecord; created: boolean }
  | { ok: false; reason: string };

export class Tasks implements TurnTaskHooks {
  private readonly waiters = new Map<number, Set<(task: TaskRecord) => void>>();
  private readonly timeouts = new Map<number, NodeJS.Timeout>();
  /** Tasks this process started or found active: looked at by the poll. */
  private readonly watched = new Set<number>();
  /** Per chat, the pump running now (one at a time, so a slot is never given twice). */
  private readonly pumps = new Map<string, Promise<void>>();
  private poll: NodeJS.Timeout | null = null;
  private started = false;

  constructor(private readonly options: TasksOptions) {}

  isChild(sessionKey: string): boolean {
    return CHILD_KEY.test(sessionKey);
  }

  childReply(sessionKey: string, text: string, awaitingApproval: boolean): string | null {
    // An approval question is asked in the chat; the answer itself is the task's result.
    return awaitingApproval ? TASK_TEXT.question(taskIdOfSession(sessionKey)!, text) : null;
  }

  async notesFor(sessionKey: string): Promise<{ ids: number[]; messages: ChatMessage[] } | null> {
    const ended = await this.options.store.listTaskNotes(sessionKey);
    if (ended.length === 0) return null;
    return {
      ids: ended.map((t) => t.id),
      messages: ended.map((t): ChatMessage => ({ role: "user", content: taskNote(t) })),
    };
  }

  async admits(sessionKey: string): Promise<boolean> {
    const id = taskIdOfSession(sessionKey);
    const task = id === null ? null : await this.options.store.getTask(id);
    return task !== null && (task.state === "queued" || task.state === "running");
  }

  /** Records a task (once per request) and starts it if its chat has room. */
  async create(request: TaskRequest): Promise<TaskCreated> {
    const { store, limits } = this.options;
    const parentId = taskIdOfSession(request.parentSessionKey);
    const parent = parentId === null ? null : await store.getTask(parentId);
    const depth = (parent?.depth ?? 0) + 1;
    if (depth > limits.maxDepth) return { ok: false, reason: TASK_TEXT.tooDeep(limits.maxDepth) };
    const { task, created } = await store.createTask({
      parentSessionKey: request.parentSessionKey,
      parentSessionId: request.parentSessionId,
      parentToolCallId: request.requestId,
      rootSessionId: parent?.rootSessionId ?? request.parentSessionId,
      // A nested task reports where its parent does, and acts for the same person.
      chat: parent?.chat ?? request.chat,
      requester: parent?.requester ?? request.requester,
      prompt: request.prompt,
      context: request.context,
      depth,
      background: request.background,
    });
    this.watched.add(task.id);
    if (this.started) await this.pump(task.chat);
    return { ok: true, task: (await store.getTask(task.id)) ?? task, created };
  }

  /** Resolves with the task once it has ended; null when `signal` aborts first. */
  async waitFor(id: number, signal: AbortSignal): Promise<TaskRecord | null> {
    const ended = (task: TaskRecord | null) =>
      task !== null && task.state !== "queued" && task.state !== "running";
    const now = await this.options.store.getTask(id);
    if (ended(now)) return now;
    if (signal.aborted) return null;
    return new Promise((resolve) => {
      const set = this.waiters.get(id) ?? new Set();
      this.waiters.set(id, set);
      const done = (task: TaskRecord | null) => {
        set.delete(onEnd);
        signal.removeEventListener("abort", onAbort);
        resolve(task);
      };
      const onEnd = (task: TaskRecord) => done(task);
      const onAbort = () => done(null);
      set.add(onEnd);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** The waiting parent stopped waiting: the task goes on, its result is posted to the chat. */
  detach(id: number): Promise<TaskRecord | null> {
    return this.options.store.detachTask(id);
  }

  /** Ends a task before its child finished (`/tasks cancel`, `keel tasks cancel`, its timeout). */
  async cancel(
    id: number,
    state: "cancelled" | "timed_out" = "cancelled",
    /** False when the caller answers the chat itself (`/tasks cancel` in that chat). */
    notify = true,
  ): Promise<TaskRecord | null> {
    const text =
      state === "cancelled"
        ? TASK_TEXT.cancelled(id)
        : TASK_TEXT.timedOut(id, Math.round(this.options.limits.timeoutMs / 1000));
    const notice = notify ? { text, when: "always" as const } : null;
    return this.end({ id, state, result: text, notice });
  }

  /** A turn ended: when it was a child's last, its task ends with the child's answer. */
  onTurnEnd(sessionKey: string): void {
    const id = taskIdOfSession(sessionKey);
    if (id === null) return;
    this.settle(id).catch((err: unknown) =>
      this.options.logger.error({ err, task: id }, "ending a task failed"),
    );
  }

  /**
   * Start-up, before resumes: tasks started longer ago than `tasks.max_age` are not continued;
   * each is marked expired and its chat told once, with its prompt. Their child sessions' resume
   * marks go, and what they left in the inbox is refused by `admits`.
   */
  async expireStale(): Promise<number> {
    const { store, limits, now } = this.options;
    let count = 0;
    for (const task of await store.listTasks({ states: ["queued", "running"] })) {
      if (now() - task.createdAt < limits.maxAgeMs) continue;
      const text = TASK_TEXT.expired(task);
      const ended = await store.endTask({
        id: task.id,
        state: "expired",
        result: "expired after downtime",
        notice: { text, when: "always" },
      });
      await store.clearResumePending(task.childKey);
      if (ended) count += 1;
    }
    if (count > 0) this.options.onNoticeQueued();
    return count;
  }

  /**
   * Start-up, after the inbox's open rows were dispatched: ends the tasks whose child finished
   * while the gateway was down (or before their end was recorded), gives every running task its
   * first message again (the inbox keeps it once) and its timeout, and starts queued tasks.
   */
  async start(): Promise<void> {
    const { store } = this.options;
    this.started = true;
    const chats = new Map<string, ChatAddress>();
    for (const task of await store.listTasks({ states: ["queued", "running"] })) {
      this.watched.add(task.id);
      chats.set(chatKey(task.chat), task.chat);
      if (task.state !== "running") continue;
      await this.settle(task.id);
      const now = await store.getTask(task.id);
      if (now?.state !== "running") continue;
      await this.options.intake(childMessage(now));
      this.armTimeout(now);
    }
    for (const chat of chats.values()) await this.pump(chat);
    const every = this.options.pollMs ?? 2000;
    this.poll = setInterval(() => void this.lookAtWatched().catch(() => {}), every);
    this.poll.unref();
  }

  stop(): void {
    this.started = false;
    if (this.poll) clearInterval(this.poll);
    this.poll = null;
    for (const timer of this.timeouts.values()) clearTimeout(timer);
    this.timeouts.clear();
  }

  /** Starts the chat's queued tasks it has room for, oldest first; one pump per chat at a time. */
  private pump(chat: ChatAddress): Promise<void> {
    const key = chatKey(chat);
    const previous = this.pumps.get(key) ?? Promise.resolve();
    const next = previous
      .then(() => this.pumpNow(chat))
      .catch((err: unknown) =>
        this.options.logger.error({ err, chat: key }, "starting tasks failed"),
      )
      .finally(() => {
        if (this.pumps.get(key) === next) this.pumps.delete(key);
      });
    this.pumps.set(key, next);
    return next;
  }

  private async pumpNow(chat: ChatAddress): Promise<void> {
    if (!this.started) return;
    const { store, limits } = this.options;
    const active = await store.listTasks({ chat, states: ["queued", "running"] });
    let running = active.filter((t) => t.state === "running" && t.background).length;
    for (const task of active) {
      if (task.state !== "queued") continue;
      // A waiting delegate call starts at once: its parent holds its place and waits for it (a
      // cap on those could leave every parent waiting for a child that never starts).
      if (task.background && running >= limits.maxConcurrent) continue;
      if (!(await store.startTask(task.id))) continue;
      if (task.background) running += 1;
      const startedTask = (await store.getTask(task.id))!;
      this.watched.add(task.id);
      this.armTimeout(startedTask);
      await this.options.intake(childMessage(startedTask));
    }
  }

  /** Ends the task if its child has finished; leaves it while the child works or will resume. */
  private async settle(id: number): Promise<void> {
    const { store } = this.options;
    const task = await store.getTask(id);
    if (task?.state !== "running") return;
    const turn = await store.childTurn(task.childKey);
    if (!turn || turn.state === "running") return;
    const session = await store.getSession(task.childKey);
    if (session?.resumePending && !session.suspended) return;
    if (turn.state === "done") {
      // Waiting for an approval (or nothing answered yet): not finished.
      if (turn.answer === null) return;
      const result = turn.answer;
      this.options.crashPoint?.("before_task_end");
      await this.end({
        id,
        state: "done",
        result,
        notice: { text: TASK_TEXT.done(id, result), when: "background" },
      });
      return;
    }
    const why =
      turn.state === "failed"
        ? "the model or a tool failed; see the gateway log"
        : "its work was interrupted and cannot continue";
    const text = TASK_TEXT.failed(id, why);
    await this.end({ id, state: "failed", result: why, notice: { text, when: "always" } });
  }

  /** Ends a task once (the store decides who is first), then frees its place and its waiters. */
  private async end(end: TaskEnd): Promise<TaskRecord | null> {
    const ended = await this.options.store.endTask(end);
    const task = ended ?? (await this.options.store.getTask(end.id));
    if (ended) {
      this.options.logger.info({ task: end.id, state: end.state }, "task ended");
      this.options.onNoticeQueued();
    }
    if (task) this.afterEnd(task);
    return ended;
  }

  private afterEnd(task: TaskRecord): void {
    if (task.state === "queued" || task.state === "running") return;
    this.watched.delete(task.id);
    const timer = this.timeouts.get(task.id);
    if (timer) clearTimeout(timer);
    this.timeouts.delete(task.id);
    // A child still working (cancelled, timed out) stops here; one that finished has nothing left.
    this.options.stopSession(task.childKey);
    for (const wake of this.waiters.get(task.id) ?? []) wake(task);
    this.waiters.delete(task.id);
    void this.pump(task.chat);
  }

  private armTimeout(task: TaskRecord): void {
    if (this.timeouts.has(task.id) || task.startedAt === null) return;
    const left = Math.max(0, task.startedAt + this.options.limits.timeoutMs - this.options.now());
    const timer = setTimeout(() => {
      this.timeouts.delete(task.id);
      this.cancel(task.id, "timed_out").catch((err: unknown) =>
        this.options.logger.error({ err, task: task.id }, "timing a task out failed"),
      );
    }, left);
    timer.unref();
    this.timeouts.set(task.id, timer);
  }

  /** Tasks ended outside this process (`keel tasks cancel`): stop their children here too. */
  private async lookAtWatched(): Promise<void> {
    for (const id of [...this.watched]) {
      const task = await this.options.store.getTask(id);
      if (!task) this.watched.delete(id);
      else if (task.state !== "queued" && task.state !== "running") this.afterEnd(task);
    }
  }
}

function chatKey(chat: ChatAddress): string {
  return `${chat.platform}:${chat.chatId}`;
}

/** The inbox row that starts a task's child session (stored once: its message id is fixed). */
export function childMessage(task: TaskRecord): InboundMessage {
  return {
    platform: TASK_PLATFORM,
    chatId: String(task.id),
    platformMessageId: "start",
    sessionKey: task.childKey,
    text: childPrompt(task),
    ...(task.requester && { senderId: task.requester }),
    senderName: `task ${task.id}`,
    address: task.chat,
  };
}
