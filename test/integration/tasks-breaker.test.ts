/**
 * The restart-loop breaker covers tasks like turns: a task's child cut off by a crash is held
 * back at a start that trips the breaker (its model is not called), and resumes once the gateway
 * has stayed up for the breaker window; the task's result then reaches the chat once. Real
 * gateway in this process, the gateway's clock and timer seams (as restart-loop-breaker.test.ts).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordBoot } from "../../src/recovery/boot-history.js";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import { childMessage } from "../../src/tasks/task-manager.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type InProcessGateway,
  startInProcessGateway,
  testSessionKey,
} from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

describe("restart-loop breaker and tasks", () => {
  let dir: ReturnType<typeof createTempDir>;
  let fake: FakeOpenAI;
  let gw: InProcessGateway | undefined;
  let now: number;
  const timers: (() => void)[] = [];

  beforeEach(async () => {
    dir = createTempDir();
    fake = await startFakeOpenAI();
    now = Date.now();
    timers.length = 0;
  });
  afterEach(async () => {
    await gw?.shutdown();
    await fake.close();
    dir.cleanup();
  });

  /** A /bg task `echo: resumed task` whose child turn a crash cut off. */
  async function seedInterruptedTask(): Promise<number> {
    const store = new SqliteStore(join(dir.path, "state.db"), { now: () => now });
    const chat = { platform: "test", chatId: "1" };
    const { task } = await store.createTask({
      parentSessionKey: testSessionKey("1"),
      parentSessionId: "s-parent",
      parentToolCallId: "bg:1",
      rootSessionId: "s-parent",
      chat,
      requester: "test:1",
      prompt: "echo: resumed task",
      context: null,
      depth: 1,
      background: true,
    });
    await store.startTask(task.id);
    const started = (await store.getTask(task.id))!;
    const { item } = await store.acceptInbound(childMessage(started));
    const turn = await store.startTurn({
      sessionKey: started.childKey,
      inboxId: item.id,
      userMessage: { role: "user", content: item.text },
      origin: chat,
    });
    await store.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });
    await store.markResumePending([started.childKey], "restart_interrupted");
    await store.close();
    return task.id;
  }

  it("holds a cut-off child back while the breaker is tripped, then resumes it; the result comes once", async () => {
    const id = await seedInterruptedTask();
    await recordBoot(dir.path, now - 20_000, 60_000);
    await recordBoot(dir.path, now - 10_000, 60_000);
    writeFileSync(join(dir.path, ".clean_shutdown"), String(now));
    gw = await startInProcessGateway({
      home: dir.path,
      modelBaseUrl: fake.baseUrl,
      now: () => now,
      schedule: (fn) => {
        timers.push(fn);
        return () => {};
      },
    });
    await waitFor(() => gw!.platform.delivered.length > 0, { message: "the held-back notice" });
    expect(fake.requests).toHaveLength(0);
    expect((await gw.gateway.store.getTask(id))!.state).toBe("running");
    for (const fire of timers.splice(0)) fire();
    const done = `🧵 task ${id} done\nresumed task`;
    await waitFor(() => gw!.platform.texts("1").includes(done), {
      message: `the result; chat: ${JSON.stringify(gw!.platform.texts("1"))}`,
    });
    expect(gw.platform.texts("1").filter((t) => t === done)).toHaveLength(1);
  });
});
