/** The store contract for tasks (src/tasks), on every implementation (see store.test.ts). */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { Store, TaskInput } from "./store.js";

const chat = { platform: "telegram", chatId: "42" };
const parentKey = "agent:main:telegram:dm:42";

function input(overrides: Partial<TaskInput> = {}): TaskInput {
  return {
    parentSessionKey: parentKey,
    parentSessionId: "s-parent",
    parentToolCallId: null,
    rootSessionId: "s-parent",
    chat,
    requester: "telegram:42",
    prompt: "count the files",
    context: null,
    depth: 1,
    background: true,
    ...overrides,
  };
}

describe.each(storeHarnesses())("the $name store: tasks", (harness) => {
  let store: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 7_000);
  });
  afterEach(async () => {
    await store.close();
    await harness.teardown();
  });

  it("creates a task once per delegate call, and a new one per /bg", async () => {
    const first = await store.createTask(input({ parentToolCallId: "call-1", background: false }));
    expect(first.created).toBe(true);
    expect(first.task).toMatchObject({
      state: "queued",
      background: false,
      childKey: `agent:main:task:${first.task.id}`,
      chat,
      createdAt: 7_000,
    });
    const again = await store.createTask(input({ parentToolCallId: "call-1" }));
    expect(again).toEqual({ task: first.task, created: false });
    const bg1 = await store.createTask(input());
    const bg2 = await store.createTask(input());
    expect(new Set([first.task.id, bg1.task.id, bg2.task.id]).size).toBe(3);
    expect((await store.listTasks({ chat })).map((t) => t.id)).toEqual([
      first.task.id,
      bg1.task.id,
      bg2.task.id,
    ]);
    expect(await store.listTasks({ chat: { platform: "telegram", chatId: "7" } })).toEqual([]);
  });

  it("ends a task once, with its notice queued in the same transaction", async () => {
    const { task } = await store.createTask(input());
    expect(await store.startTask(task.id)).toBe(true);
    expect(await store.startTask(task.id)).toBe(false);
    const ended = await store.endTask({
      id: task.id,
      state: "done",
      result: "3 files",
      notice: { text: "🧵 task done: 3 files", when: "background" },
    });
    expect(ended).toMatchObject({ state: "done", result: "3 files", startedAt: 7_000 });
    expect(
      await store.endTask({
        id: task.id,
        state: "cancelled",
        result: null,
        notice: { text: "cancelled", when: "always" },
      }),
    ).toBeNull();
    const rows = await harness.rows("SELECT text, kind FROM outbox ORDER BY id");
    expect(rows).toEqual([{ text: "🧵 task done: 3 files", kind: "notice" }]);
  });

  it("a foreground task's result goes to its parent, not the chat, unless the parent stopped waiting", async () => {
    const a = (await store.createTask(input({ parentToolCallId: "a", background: false }))).task;
    const b = (await store.createTask(input({ parentToolCallId: "b", background: false }))).task;
    const notice = { text: "result", when: "background" as const };
    await store.endTask({ id: a.id, state: "done", result: "x", notice });
    expect(await store.detachTask(b.id)).toMatchObject({ background: true });
    await store.endTask({ id: b.id, state: "done", result: "y", notice });
    expect(await harness.rows("SELECT text FROM outbox")).toEqual([{ text: "result" }]);
    // Ended already: detaching changes nothing.
    expect(await store.detachTask(a.id)).toMatchObject({ background: false, state: "done" });
  });

  it("lists a parent's ended background tasks until they are noted", async () => {
    const a = (await store.createTask(input())).task;
    const b = (await store.createTask(input())).task;
    await store.endTask({ id: a.id, state: "done", result: "x", notice: null });
    expect((await store.listTaskNotes(parentKey)).map((t) => t.id)).toEqual([a.id]);
    await store.markTasksNoted([a.id]);
    expect(await store.listTaskNotes(parentKey)).toEqual([]);
    expect((await store.listTasks({ states: ["queued"] })).map((t) => t.id)).toEqual([b.id]);
  });

  it("reads a child's latest turn and its final answer; its usage counts toward the chat", async () => {
    const { task } = await store.createTask(input());
    expect(await store.childTurn(task.childKey)).toBeNull();
    const turn = await store.startTurn({
      sessionKey: task.childKey,
      inboxId: null,
      userMessage: { role: "user", content: "count" },
    });
    expect(await store.childTurn(task.childKey)).toEqual({ state: "running", answer: null });
    await store.finishTurn({
      turnId: turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "3 files" },
      reply: null,
      usage: { model: "m", promptTokens: 10, completionTokens: 2, estimated: false },
    });
    expect(await store.childTurn(task.childKey)).toEqual({ state: "done", answer: "3 files" });
    expect(await store.sessionUsage("s-parent")).toMatchObject({ calls: 1, promptTokens: 10 });
  });
});
