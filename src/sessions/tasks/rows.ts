/** Task rows as both engines return them, and the record each becomes (SQLite 0/1, Postgres booleans). */
import type { ChatAddress } from "../../contract/platform.js";
import type { TaskEnd, TaskRecord, TaskState } from "../task-records.js";

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

/** Whether the notice of `end` goes to the chat, given the task as it is when it ends. */
export function taskNoticeText(end: TaskEnd, task: TaskRecord): string | null {
  if (!end.notice) return null;
  if (end.notice.when === "background" && !task.background) return null;
  return end.notice.text;
}

/** The last message as a final answer: an assistant message with text and no tool calls. */
export function finalAnswer(body: string | undefined): string | null {
  if (!body) return null;
  const m = JSON.parse(body) as { role: string; content?: unknown; tool_calls?: unknown[] };
  if (m.role !== "assistant" || (m.tool_calls?.length ?? 0) > 0) return null;
  return typeof m.content === "string" ? m.content : "";
}
