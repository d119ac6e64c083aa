/** Task rows as both engines return them, and the record each becomes (SQLite 0/1, Postgres booleans). */
import type { ChatAddress } from "../../contract/platform.js";
import type { NewOutboxRow } from "../store-rows.js";
import type { TaskEnd, TaskInput, TaskRecord, TaskState } from "../task-records.js";

export interface TaskRow {
  id: number | string;
  parent_session_key: string;
  parent_session_id: string;
  parent_tool_call_id: string | null;
  root_session_id: string;
  child_key: string;
  chat: string;
  requester: string | null;
  prompt: string;
  context: string | null;
  depth: number;
  background: number | boolean;
  state: TaskState;
  result: string | null;
  created_at: number | string;
  started_at: number | string | null;
  finished_at: number | string | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

export function toTask(r: TaskRow): TaskRecord {
  return {
    id: Number(r.id),
    parentSessionKey: r.parent_session_key,
    parentSessionId: r.parent_session_id,
    parentToolCallId: r.parent_tool_call_id,
    rootSessionId: r.root_session_id,
    childKey: r.child_key,
    chat: JSON.parse(r.chat) as ChatAddress,
    requester: r.requester,
    prompt: r.prompt,
    context: r.context,
    depth: r.depth,
    background: r.background === true || r.background === 1,
    state: r.state,
    result: r.result,
    createdAt: Number(r.created_at),
    startedAt: num(r.started_at),
    finishedAt: num(r.finished_at),
  };
}

/** The child session of task `id`: a lane of its own, like a chat's. */
export function taskChildKey(id: number): string {
  return `agent:main:task:${id}`;
}

export const ACTIVE_TASK_STATES: readonly TaskState[] = ["queued", "running"];

/** The notice of `end` for the task's chat, given the task as it is when it ends; null: none. */
export function taskNoticeRow(end: TaskEnd, task: TaskRecord): NewOutboxRow | null {
  if (!end.notice) return null;
  if (end.notice.when === "background" && !task.background) return null;
  const { parentSessionKey: sessionKey, parentSessionId: sessionId, chat: address } = task;
  return { sessionKey, sessionId, turnId: null, address, text: end.notice.text, kind: "notice" };
}

/** A new task, queued; its child key is set once its id is known. */
export const INSERT_TASK = `INSERT INTO tasks (parent_session_key, parent_session_id,
    parent_tool_call_id, root_session_id, child_key, chat_platform, chat_id, chat, requester,
    prompt, context, depth, background, state, created_at)
  VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?) RETURNING id`;

export function taskParams(input: TaskInput, now: number): unknown[] {
  const { parentSessionKey, parentSessionId, parentToolCallId, rootSessionId, chat } = input;
  return [
    ...[parentSessionKey, parentSessionId, parentToolCallId, rootSessionId, chat.platform],
    ...[chat.chatId, JSON.stringify(chat), input.requester, input.prompt, input.context],
    ...[input.depth, input.background ? 1 : 0, now],
  ];
}

export const SET_CHILD_KEY = "UPDATE tasks SET child_key = ? WHERE id = ?";

/** Ends a task still queued or running (SQLite's `?`; Postgres converts it with pgSql). */
export const END_TASK = `UPDATE tasks SET state = ?, result = ?, finished_at = ?
  WHERE id = ? AND state IN ('queued', 'running')`;

/** The last message as a final answer: an assistant message with text and no tool calls. */
export function finalAnswer(body: string | undefined): string | null {
  if (!body) return null;
  const m = JSON.parse(body) as { role: string; content?: unknown; tool_calls?: unknown[] };
  if (m.role !== "assistant" || (m.tool_calls?.length ?? 0) > 0) return null;
  return typeof m.content === "string" ? m.content : "";
}
