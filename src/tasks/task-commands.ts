/** `/bg PROMPT` and `/tasks [cancel N]`: a chat's background tasks. */
import type { InboxItem, TaskStore } from "../sessions/store.js";
import type { Tasks } from "./task-manager.js";
import { describeTask, TASK_TEXT } from "./task-texts.js";

export interface TaskCommandDeps {
  tasks: Tasks;
  store: TaskStore;
  now: () => number;
}

/** Starts a background task for the chat; the inbox row names it, so a re-run finds it. */
export async function bgCommand(deps: TaskCommandDeps, item: InboxItem, args: string) {
  const prompt = args.trim();
  if (!prompt) return TASK_TEXT.bgUsage;
  const created = await deps.tasks.create({
    parentSessionKey: item.sessionKey,
    parentSessionId: item.sessionId,
    requestId: `bg:${item.id}`,
    chat: item.address,
    requester: item.senderId === undefined ? null : `${item.platform}:${item.senderId}`,
    prompt,
    context: null,
    background: true,
  });
  if (!created.ok) return created.reason;
  const { task } = created;
  if (task.state !== "queued") return TASK_TEXT.started(task.id);
  const running = await deps.store.listTasks({ chat: item.address, states: ["running"] });
  return TASK_TEXT.queued(task.id, running.filter((t) => t.background).length);
}

export async function tasksCommand(deps: TaskCommandDeps, item: InboxItem, args: string) {
  const [verb, id] = args.trim().split(/\s+/);
  if (!verb) {
    const mine = await deps.store.listTasks({ chat: item.address, limit: 20 });
    if (mine.length === 0) return TASK_TEXT.noTasks;
    return mine.map((task) => describeTask(task, deps.now())).join("\n");
  }
  if (verb !== "cancel" || !id || !/^\d+$/.test(id)) return TASK_TEXT.tasksUsage;
  const task = await deps.store.getTask(Number(id));
  const here =
    task?.chat.platform === item.address.platform && task.chat.chatId === item.address.chatId;
  if (!task || !here) return TASK_TEXT.notHere(id);
  // Answered here, in this chat: the cancellation queues no notice of its own.
  const ended = await deps.tasks.cancel(task.id, "cancelled", false);
  return ended ? TASK_TEXT.cancelled(task.id) : TASK_TEXT.alreadyEnded(task);
}
