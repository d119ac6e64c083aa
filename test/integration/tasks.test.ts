/**
 * Subagents and background tasks (src/tasks) in a real gateway in this process, with the stand-in
 * model: `delegate` waits for its child or runs it in the background, `/bg` and `/tasks`, the
 * per-chat cap, cancellation, the timeout, the depth limit, and a child's approval answered in
 * the parent's chat.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import {
  type InProcessGateway,
  startInProcessGateway,
  testSessionKey,
} from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

/** The request a child's model call answers, without the task header. */
const childText = (request: FakeChatRequest) =>
  lastUserText(request)
    .replace(/^\[Task \d+:[^\]]*\]\s*/, "")
    .trim();

describe("tasks (in-process gateway, stand-in model)", () => {
  let home: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let gw: InProcessGateway | undefined;
  /** `hold N` requests wait until released (each resolves its own). */
  let releases: Map<string, () => void>;
  let holding: Set<string>;
  let maxHolding: number;
  let holdOrder: string[];

  beforeEach(async () => {
    home = createTempDir("keel-tasks-");
    model = await startFakeOpenAI();
    releases = new Map();
    holding = new Set();
    maxHolding = 0;
    holdOrder = [];
    model.script(async (request) => {
      const hold = /^hold (\w+)$/.exec(childText(request));
      const last = request.messages.at(-1);
      if (!hold || last?.role !== "user") return defaultScript(request);
      const name = hold[1]!;
      holding.add(name);
      holdOrder.push(name);
      maxHolding = Math.max(maxHolding, holding.size);
      await new Promise<void>((resolve) => releases.set(name, resolve));
      holding.delete(name);
      return { text: `held ${name}` };
    });
  });

  afterEach(async () => {
    for (const release of releases.values()) release();
    await gw?.shutdown();
    gw = undefined;
    await model.close();
    home.cleanup();
  });

  async function start(config = "") {
    if (config) writeFileSync(join(home.path, "config.yaml"), config);
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
    return gw;
  }

  const texts = () => gw!.platform.texts("1");
  const seen = (predicate: (text: string) => boolean, what: string) =>
    waitFor(() => texts().find(predicate), {
      timeoutMs: 10_000,
      message: `${what}; chat: ${JSON.stringify(texts())}`,
    });

  it("a waiting delegate returns the child's answer; only the parent's reply reaches the chat", async () => {
    await start();
    await gw!.send("delegate: echo: from the child", "1", false);
    await seen((t) => t === "delegated: from the child", "the parent's reply");
    expect(texts()).toEqual(["delegated: from the child"]);
    const [task] = await gw!.gateway.store.listTasks();
    expect(task).toMatchObject({
      state: "done",
      background: false,
      result: "from the child",
      depth: 1,
      requester: "test:1",
      parentSessionKey: testSessionKey("1"),
    });
    // The child's calls count toward the chat's usage.
    const session = await gw!.gateway.store.getSession(testSessionKey("1"));
    const usage = await gw!.gateway.store.sessionUsage(session!.sessionId);
    expect(usage.calls).toBe(3);
  });

  it("/bg answers at once, posts the result once, and the next turn knows it", async () => {
    await start();
    await gw!.send("/bg hold a");
    await seen((t) => /^🧵 task \d+ started$/.test(t), "the acknowledgement");
    await waitFor(() => releases.has("a"));
    releases.get("a")!();
    const done = await seen((t) => /^🧵 task \d+ done\nheld a$/.test(t), "the result");
    expect(texts().filter((t) => t === done)).toHaveLength(1);
    await gw!.send("echo: next");
    await seen((t) => t === "next", "the next reply");
    const last = model.requests.at(-1)!;
    const note = last.messages.find(
      (m) => m.role === "user" && String(m.content).includes("background task"),
    );
    expect(String(note?.content)).toContain("held a");
    expect(await gw!.gateway.store.listTaskNotes(testSessionKey("1"))).toEqual([]);
  });

  it("a background delegate returns a task id; the result comes as its own message", async () => {
    await start();
    await gw!.send("bg-delegate: echo: later");
    await seen((t) => t.startsWith("delegated: Task "), "the parent's reply");
    await seen((t) => /^🧵 task \d+ done\nlater$/.test(t), "the result");
  });

  it("runs at most tasks.max_concurrent per chat; the others wait in order and all finish once", async () => {
    await start("tasks:\n  max_concurrent: 3\n");
    const names = Array.from({ length: 10 }, (_, i) => `t${i}`);
    for (const name of names) await gw!.send(`/bg hold ${name}`);
    await waitFor(async () => (await gw!.gateway.store.listTasks()).length === 10);
    await waitFor(() => holding.size === 3, { message: "three running" });
    const queued = await gw!.gateway.store.listTasks({ states: ["queued"] });
    expect(queued).toHaveLength(7);
    await seen((t) => t.includes("queued"), "a queued acknowledgement");
    for (const name of names) {
      await waitFor(() => releases.has(name), { timeoutMs: 10_000, message: `${name} started` });
      releases.get(name)!();
    }
    for (const name of names) await seen((t) => t.endsWith(`\nheld ${name}`), `${name}'s result`);
    expect(maxHolding).toBe(3);
    expect(holdOrder).toEqual(names);
    const results = texts().filter((t) => /^🧵 task \d+ done/.test(t));
    expect(results).toHaveLength(10);
    expect((await gw!.gateway.store.listTasks({ states: ["done"] })).length).toBe(10);
  });

  it("/tasks lists the chat's tasks and /tasks cancel stops one, said once", async () => {
    await start();
    await gw!.send("/bg hold c");
    await waitFor(() => holding.has("c"));
    const [task] = await gw!.gateway.store.listTasks();
    await gw!.send("/tasks");
    await seen((t) => t.startsWith(`${task!.id}  running  background`), "the list");
    // The dashboard's status lists it.
    const status = await fetch(`${gw!.url}/api/status`, {
      headers: { authorization: `Bearer ${gw!.controlToken}` },
    });
    const body = (await status.json()) as { tasks: unknown[] };
    expect(body.tasks).toEqual([
      expect.objectContaining({ id: task!.id, state: "running", chat: "test:1", prompt: "hold c" }),
    ]);
    await gw!.send(`/tasks cancel ${task!.id}`);
    await seen((t) => t === `🧵 task ${task!.id} cancelled`, "the cancellation");
    await waitFor(() => gw!.gateway.runner.activeTurns().length === 0, {
      message: "the child's turn stopped",
    });
    await gw!.send(`/tasks cancel ${task!.id}`);
    await seen((t) => t.startsWith(`Task ${task!.id} already ended`), "already ended");
    expect(texts().filter((t) => t.includes("cancelled"))).toHaveLength(2);
    expect(texts().some((t) => t.includes("done"))).toBe(false);
    expect((await gw!.gateway.store.getTask(task!.id))!.state).toBe("cancelled");
  });

  it("a task running longer than tasks.timeout is stopped, and the chat told once", async () => {
    await start("tasks:\n  timeout: 0.5\n");
    await gw!.send("/bg hold slow");
    await seen((t) => /^🧵 task \d+ stopped: it ran longer than tasks.timeout/.test(t), "timeout");
    await waitFor(() => gw!.gateway.runner.activeTurns().length === 0);
    const [task] = await gw!.gateway.store.listTasks();
    expect(task!.state).toBe("timed_out");
  });

  it("a delegate deeper than tasks.max_depth is refused to the model, which goes on", async () => {
    await start("tasks:\n  max_depth: 1\n");
    await gw!.send("delegate: delegate: echo: deep");
    await seen((t) => t.startsWith("delegated: delegated: "), "the parent's reply");
    expect(texts()[0]).toContain("Delegation is limited to 1 level");
    expect(await gw!.gateway.store.listTasks()).toHaveLength(1);
  });

  it("a child's approval is asked in the parent's chat, and answering there lets the child go on", async () => {
    await start();
    const command = "rm -rf scratch && echo ran >> ledger.txt";
    // Not an operator: only the person who asked may answer.
    await gw!.send(`delegate: run: ${command}`, "1", false);
    const question = await waitFor(
      () => gw!.platform.delivered.find((d) => d.address.chatId === "1" && d.approvalId),
      { timeoutMs: 10_000, message: `the question; chat: ${JSON.stringify(texts())}` },
    );
    expect(question.text).toMatch(/^🧵 task \d+\n/);
    expect(question.text).toContain(command);
    // `/approve` alone finds it too: the question waits in this chat, from the child's session.
    await gw!.send("/approve", "1", false);
    await seen((t) => t.startsWith("delegated: ran: "), "the parent's reply");
    const [task] = await gw!.gateway.store.listTasks();
    expect(task!.state).toBe("done");
  });
});
