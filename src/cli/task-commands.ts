/**
 * `keel tasks list|show|cancel`: reads and ends tasks in the store directly, so it works whether or
 * not the gateway runs. A cancellation is the task's end, recorded with its notice to the chat in
 * one transaction; a running gateway stops the child within a few seconds (it looks at the tasks
 * it runs every 2 s) and its outbox sends the notice (it looks for rows other processes wrote).
 */
import type { Command } from "commander";
import { isoTime } from "../lib/wire-time.js";
import type { TaskRecord } from "../sessions/store.js";
import { describeTask, TASK_TEXT } from "../tasks/task-texts.js";
import type { CommandContext } from "./command-context.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { withStore } from "./store-commands.js";

export function registerTaskCommands(program: Command, { io, global, run }: CommandContext): void {
  const tasks = program.command("tasks").description("subagents and background tasks");
  tasks
    .command("list")
    .description("the latest tasks, oldest first")
    .option("--json", "machine-readable output")
    .action((opts: { json?: boolean }) => run(() => tasksList({ ...global(), ...opts }, io)));
  tasks
    .command("show <id>")
    .description("one task: its chat, request, state and result")
    .action((id: string) => run(() => tasksShow(id, global(), io)));
  tasks
    .command("cancel <id>")
    .description("stop a task; its chat is told")
    .action((id: string) => run(() => tasksCancel(id, global(), io)));
}

export function tasksList(options: GlobalOptions & { json?: boolean }, io: CliIo) {
  return withStore(options, io, async (store) => {
    const tasks = await store.listTasks({ limit: 200 });
    if (options.json) io.out(JSON.stringify(tasks.map(taskJson), null, 2));
    else if (tasks.length === 0) io.out("No tasks.");
    else for (const task of tasks) io.out(`${describeTask(task, Date.now())}  ${chatOf(task)}`);
    return EXIT.ok;
  });
}

export function tasksShow(id: string, options: GlobalOptions, io: CliIo) {
  return withTask(id, options, io, async (task) => {
    io.out(JSON.stringify(taskJson(task), null, 2));
    return EXIT.ok;
  });
}

export function tasksCancel(id: string, options: GlobalOptions, io: CliIo) {
  return withTask(id, options, io, async (task, store) => {
    const text = TASK_TEXT.cancelled(task.id);
    const ended = await store.endTask({
      id: task.id,
      state: "cancelled",
      result: text,
      notice: { text, when: "always" },
    });
    if (!ended) {
      io.err(TASK_TEXT.alreadyEnded(task));
      return EXIT.failure;
    }
    io.out(`Task ${task.id} cancelled; its chat (${chatOf(task)}) is told.`);
    return EXIT.ok;
  });
}

function withTask(
  id: string,
  options: GlobalOptions,
  io: CliIo,
  fn: (task: TaskRecord, store: Parameters<Parameters<typeof withStore>[2]>[0]) => Promise<number>,
): Promise<number> {
  return withStore(options, io, async (store) => {
    const task = /^\d+$/.test(id) ? await store.getTask(Number(id)) : null;
    if (!task) {
      io.err(`No task ${id}.`);
      return EXIT.usage;
    }
    return fn(task, store);
  });
}

function chatOf(task: TaskRecord): string {
  return `${task.chat.platform}:${task.chat.chatId}`;
}

function taskJson(task: TaskRecord) {
  return {
    id: task.id,
    state: task.state,
    background: task.background,
    depth: task.depth,
    chat: chatOf(task),
    parent_session: task.parentSessionKey,
    child_session: task.childKey,
    prompt: task.prompt,
    result: task.result,
    created_at: isoTime(task.createdAt),
    started_at: isoTime(task.startedAt),
    finished_at: isoTime(task.finishedAt),
  };
}
