/** What tasks say in chats and to the model. */
import type { TaskRecord } from "../sessions/store.js";

const clip = (text: string, max: number) =>
  text.length > max ? `${text.slice(0, max - 1)}…` : text;

export const TASK_TEXT = {
  started: (id: number) => `🧵 task ${id} started`,
  queued: (id: number, ahead: number) =>
    `🧵 task ${id} queued (${ahead} task${ahead === 1 ? "" : "s"} of this chat running; it starts when one ends)`,
  done: (id: number, result: string) => `🧵 task ${id} done\n${result}`,
  failed: (id: number, why: string) => `🧵 task ${id} failed: ${why}`,
  cancelled: (id: number) => `🧵 task ${id} cancelled`,
  timedOut: (id: number, seconds: number) =>
    `🧵 task ${id} stopped: it ran longer than tasks.timeout (${seconds} s)`,
  expired: (task: TaskRecord) =>
    `🧵 task ${task.id} expired: it was started too long ago to continue after the gateway was down. ` +
    `Its request was: ${clip(task.prompt, 500)}\nSend /bg with it to start it again.`,
  question: (id: number, text: string) => `🧵 task ${id}\n${text}`,
  bgUsage: "Usage: /bg PROMPT (starts a background task for this chat)",
  tasksUsage: "Usage: /tasks, or /tasks cancel N",
  noTasks: "No tasks in this chat.",
  notHere: (id: string) => `There is no task ${id} in this chat.`,
  alreadyEnded: (task: TaskRecord) => `Task ${task.id} already ended (${task.state}).`,
  tooDeep: (max: number) =>
    `Delegation is limited to ${max} level${max === 1 ? "" : "s"} (tasks.max_depth): do this part yourself.`,
} as const;

/** One line per task for `/tasks` and `keel tasks list`. */
export function describeTask(task: TaskRecord, now: number): string {
  const kind = task.background ? "background" : "delegated";
  const since = task.startedAt ?? task.createdAt;
  const age = Math.max(0, Math.round((now - since) / 1000));
  const when = task.finishedAt === null ? `${age} s` : "ended";
  return `${task.id}  ${task.state}  ${kind}  ${when}  ${clip(task.prompt.replace(/\s+/g, " "), 60)}`;
}

/** What a parent session's transcript records of an ended background task. */
export function taskNote(task: TaskRecord): string {
  const result =
    task.state === "done"
      ? (task.result ?? "")
      : `${task.state}${task.result ? `: ${task.result}` : ""}`;
  return (
    `[Keel: background task ${task.id} ("${clip(task.prompt, 200)}") ended; ` +
    `its result was posted to the chat:]\n${result}`
  );
}

/** The result a waiting `delegate` call returns. */
export function delegateResult(task: TaskRecord): string {
  if (task.state === "done") return task.result ?? "";
  return `[Task ${task.id} ${task.state}${task.result ? `: ${task.result}` : ""}]`;
}

/** The child's first message: which task it is, the context it was given, the request. */
export function childPrompt(task: TaskRecord): string {
  const context = task.context ? `Context from the requester:\n${task.context}\n\n` : "";
  return (
    `[Task ${task.id}: you are a sub-agent working for another conversation. Do the task below ` +
    `and answer with its result; your answer is handed back, nobody reads along.]\n\n` +
    `${context}${task.prompt}`
  );
}
