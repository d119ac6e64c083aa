/**
 * Tasks across SIGKILL, end to end: the built gateway process, the stand-in Telegram Bot API and
 * model. Killed while a child runs (its parent waiting on it), and between a child's end and the
 * task's end (crash point `before_task_end`): after the restart the result reaches the chat
 * exactly once. A task older than `tasks.max_age` is not resumed after downtime: its chat is told
 * once, with the prompt. `keel tasks` lists, shows and cancels.
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
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import {
  bootedPids,
  freePort,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-tasks";
const USER = 4242;

const childText = (request: FakeChatRequest) =>
  lastUserText(request)
    .replace(/^\[Task \d+:[^\]]*\]\s*/, "")
    .trim();

describe("tasks across crashes (real process, stand-in Telegram)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  let port: number;
  const spawned: GatewayProcess[] = [];
  /** Model calls a child made for `hold NAME` (its first request; later ones answer at once). */
  let holds: string[];

  beforeEach(async () => {
    home = createTempDir("keel-tasks-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
    port = await freePort();
    holds = [];
    // `hold NAME` hangs on the first call (the test kills the gateway meanwhile), then answers.
    model.script((request) => {
      const hold = /^hold (\w+)$/.exec(childText(request));
      if (!hold) return defaultScript(request);
      const name = hold[1]!;
      holds.push(name);
      return holds.filter((h) => h === name).length === 1
        ? { hang: true }
        : { text: `held ${name}` };
    });
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  async function start(env: Record<string, string> = {}): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: String(USER),
        OPENAI_BASE_URL: model.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_HTTP_PORT: String(port),
        ...env,
      },
    });
    spawned.push(gateway);
    const boots = bootedPids(home.path).length;
    await waitFor(() => bootedPids(home.path).length > boots || gateway.exitStatus !== null, {
      timeoutMs: 20_000,
      message: `gateway running\n${gateway.output().slice(-2000)}`,
    });
    return gateway;
  }

  async function killed(gateway: GatewayProcess): Promise<void> {
    gateway.kill("SIGKILL");
    await gateway.waitForExit(10_000);
  }

  const texts = () =>
    telegram
      .chatLog(USER)
      .filter((e) => e.from === "bot")
      .map((e) => e.text);
  const seen = (predicate: (text: string) => boolean, what: string) =>
    waitFor(() => texts().find(predicate), {
      timeoutMs: 20_000,
      message: `${what}; chat: ${JSON.stringify(texts())}`,
    });
  const say = (text: string) => telegram.sendUserMessage({ chatId: USER, text, firstName: "Ada" });

  it("SIGKILL while the child runs and its parent waits: both continue, the answer comes once", async () => {
    const first = await start();
    say("delegate: hold k1");
    await waitFor(() => holds.includes("k1"), { timeoutMs: 20_000, message: "the child's call" });
    await killed(first);
    await start();
    await seen((t) => t.startsWith("delegated: "), "the parent's answer after the restart");
    const answers = texts().filter((t) => t.startsWith("delegated: "));
    expect(answers).toEqual(["delegated: held k1"]);
    // The re-run call found the same task: one task, done.
    const list = await runKeel({ home: home.path, args: ["tasks", "list", "--json"] });
    const tasks = JSON.parse(list.stdout) as { state: string; background: boolean }[];
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toMatchObject({ state: "done", background: false });
  });

  it("SIGKILL while a /bg task's child runs: it continues after the restart, its result comes once", async () => {
    const first = await start();
    say("/bg hold k2");
    await seen((t) => /^🧵 task \d+ started$/.test(t), "the acknowledgement");
    await waitFor(() => holds.includes("k2"), { timeoutMs: 20_000, message: "the child's call" });
    await killed(first);
    await start();
    await seen((t) => /^🧵 task \d+ done\nheld k2$/.test(t), "the result");
    say("echo: after");
    await seen((t) => t === "after", "the next reply");
    expect(texts().filter((t) => t.includes("held k2"))).toHaveLength(1);
  });

  for (const how of ["delegate", "/bg"] as const) {
    it(`SIGKILL between the child's end and the task's end (${how}): the result comes once`, async () => {
      const first = await start({ KEEL_CRASH_POINT: "before_task_end" });
      say(how === "/bg" ? "/bg echo: crashed once" : "delegate: echo: crashed once");
      await first.waitForExit(20_000);
      expect(first.exitStatus?.signal).toBe("SIGKILL");
      await start();
      const result =
        how === "/bg" ? /^🧵 task \d+ done\ncrashed once$/ : /^delegated: crashed once$/;
      await seen((t) => result.test(t), "the result after the restart");
      say("echo: after");
      await seen((t) => t === "after", "the next reply");
      expect(texts().filter((t) => t.includes("crashed once"))).toHaveLength(1);
    });
  }

  it("a task older than tasks.max_age is not resumed after downtime; the chat is told once", async () => {
    writeFileSync(join(home.path, "config.yaml"), "tasks:\n  max_age: 1\n");
    const first = await start();
    say("/bg hold old");
    await waitFor(() => holds.includes("old"), { timeoutMs: 20_000, message: "the child's call" });
    await killed(first);
    const list = await runKeel({ home: home.path, args: ["tasks", "list", "--json"] });
    const [task] = JSON.parse(list.stdout) as { created_at: string }[];
    await waitFor(() => Date.now() > Date.parse(task!.created_at) + 1500, { timeoutMs: 5000 });
    const second = await start();
    const expired = await seen((t) => /^🧵 task \d+ expired/.test(t), "the expiry notice");
    expect(expired).toContain("hold old");
    say("echo: after");
    await seen((t) => t === "after", "the next reply");
    // Never run again, and told once, also across another restart.
    expect(holds.filter((h) => h === "old")).toHaveLength(1);
    await second.terminate(20_000);
    await start();
    say("echo: again");
    await seen((t) => t === "again", "a reply after another restart");
    expect(texts().filter((t) => /expired/.test(t))).toHaveLength(1);
    expect(holds.filter((h) => h === "old")).toHaveLength(1);
  });

  it("keel tasks cancel stops a running task; its chat is told once", async () => {
    await start();
    say("/bg hold cli");
    await waitFor(() => holds.includes("cli"), { timeoutMs: 20_000, message: "the child's call" });
    const cancel = await runKeel({ home: home.path, args: ["tasks", "cancel", "1"] });
    expect(cancel.code).toBe(0);
    await seen((t) => t === "🧵 task 1 cancelled", "the cancellation");
    const show = await runKeel({ home: home.path, args: ["tasks", "show", "1"] });
    expect(JSON.parse(show.stdout)).toMatchObject({
      id: 1,
      state: "cancelled",
      prompt: "hold cli",
    });
    const again = await runKeel({ home: home.path, args: ["tasks", "cancel", "1"] });
    expect(again.code).toBe(1);
    say("echo: after");
    await seen((t) => t === "after", "the next reply");
    expect(texts().filter((t) => t.includes("cancelled"))).toHaveLength(1);
  });

  it("a background task's approval is asked with buttons in the chat; the press there lets it go on", async () => {
    await start();
    say("/bg run: rm -rf scratch && echo ran >> ledger.txt");
    const cards = () =>
      telegram.chatLog(USER).filter((e) => e.from === "bot" && e.sentButtons?.length);
    await waitFor(() => cards().length > 0, {
      timeoutMs: 20_000,
      message: `the approval card; chat: ${JSON.stringify(texts())}`,
    });
    const card = cards()[0]!;
    expect(card.text).toMatch(/^🧵 task 1\n/);
    const data = card.sentButtons!.flat().map((b) => b.callback_data ?? "");
    const approve = data.find((d) => d.startsWith("approve:"))!;
    telegram.pressButton({
      chatId: USER,
      messageId: card.messageId,
      userId: USER,
      data: approve,
      firstName: "Ada",
    });
    await seen((t) => /^🧵 task 1 done\nran: /.test(t), "the task's result");
    const show = await runKeel({ home: home.path, args: ["tasks", "show", "1"] });
    expect(JSON.parse(show.stdout)).toMatchObject({ state: "done" });
  });
});
