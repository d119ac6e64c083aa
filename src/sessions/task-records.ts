/** The records of tasks (src/tasks): work handed to a child session. */
import type { ChatAddress } from "../contract/platform.js";
import type { TurnState } from "./records.js";

/**
 * A task (src/tasks): work handed to a child session, by the `delegate` tool or `/bg`.
 * `queued → running → done / failed / cancelled / expired / timed_out`; only the first end counts.
 */
export type TaskState =
  | "queued"
  | "running"
  | "done"
  | "failed"
  | "cancelled"
  | "expired"
  | "timed_out";

export const TASK_ENDS = ["done", "failed", "cancelled", "expired", "timed_out"] as const;
export type TaskEndState = (typeof TASK_ENDS)[number];

export interface TaskRecord {
  id: number;
  /** The session that asked for it (the chat's, or another task's for a nested delegate). */
  parentSessionKey: string;
  parentSessionId: string;
  /** The `delegate` call that asked for it; null for `/bg`. One task per call, ever. */
  parentToolCallId: string | null;
  /** The transcript of the chat at the top of the nesting: the usage counts toward it. */
  rootSessionId: string;
  /** The child session's key (`agent:main:task:<id>`). */
  childKey: string;
  /** The chat it reports to (results, notices, approvals). */
  chat: ChatAddress;
  /** `<platform>:<user id>` of who asked, when known: they may answer the child's approvals. */
  requester: string | null;
  prompt: string;
  context: string | null;
  /** 1 for a task of a chat, 2 for a task's own delegate, … */
  depth: number;
  /** True for `/bg` and `delegate {background: true}`, and for a delegate whose parent stopped waiting. */
  background: boolean;
  state: TaskState;
  result: string | null;
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
}

export type TaskInput = Pick<
  TaskRecord,
  | "parentSessionKey"
  | "parentSessionId"
  | "parentToolCallId"
  | "rootSessionId"
  | "chat"
  | "requester"
  | "prompt"
  | "context"
  | "depth"
  | "background"
>;

/** See TaskStore.endTask. */
export interface TaskEnd {
  id: number;
  state: TaskEndState;
  result: string | null;
  /** Queued to the task's chat in the same transaction, when this call ends the task. */
  notice: { text: string; when: "always" | "background" } | null;
}

/** A child session's latest turn, for telling whether its task has finished. */
export interface ChildTurn {
  state: TurnState;
  /** Text of the transcript's last message when it is an assistant answer without tool calls. */
  answer: string | null;
}
