/**
 * Scheduled tasks with the real process: fires on schedule, exactly one reply per slot across a
 * SIGKILL, the misfire policy after downtime, one-shots, and the agent's `schedule` tool.
 * Slots are read from what the model was asked (each fire's header names its slot), so nothing
 * here depends on how fast the machine is: waits are bounded loops, not timed assertions.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  defaultScript,
  type FakeChatRequest,
  type FakeOpenAI,
  lastUserText,
  startFakeOpenAI,
} from "../fakes/openai-server.js";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, runKeel, startGatewayProcess } from "../helpers/gateway-process.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

const TOKEN = "123456:E2E-token";
const USER = 4242;

/** The slot a fire was for, from the header of the message the model got. */
function slotOf(text: string, job: string): number | null {
  const match = new RegExp(`\\[Scheduled task "${job}", due ([^\\].]+\\.\\d{3}Z)`).exec(text);
  return match ? Date.parse(match[1]!) : null;
}

/** Real processes waiting on real slots, on a shared machine: generous bounds. */
const TEST_TIMEOUT_MS = 120_000;

describe("scheduled tasks (real processes)", () => {
  let home: ReturnType<typeof createTempDir>;
  let telegram: FakeTelegram;
  let model: FakeOpenAI;
  const spawned: GatewayProcess[] = [];

  beforeEach(async () => {
    home = createTempDir("keel-sched-e2e-");
    telegram = await startFakeTelegram({ token: TOKEN });
    model = await startFakeOpenAI();
  });

  afterEach(async () => {
    for (const gateway of spawned.splice(0)) await gateway.stop();
    await telegram.close();
    await model.close();
    home.cleanup();
  });

  const env = () => ({
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    TELEGRAM_ALLOWED_USERS: String(USER),
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "fake-model",
  });

  async function start(crashPoint?: string): Promise<GatewayProcess> {
    const gateway = await startGatewayProcess({
      home: home.path,
      env: env(),
      ...(crashPoint && { crashPoint }),
    });
    spawned.push(gateway);
    return gateway;
  }

  async function keel(...args: string[]): Promise<string> {
    const result = await runKeel({ home: home.path, args, env: env() });
    expect(result.code, `keel ${args.join(" ")}: ${result.stderr}`).toBe(0);
    return result.stdout;
  }

  async function jobs(): Promise<Array<Record<string, unknown>>> {
    return JSON.parse(await keel("schedule", "list", "--json")) as Array<Record<string, unknown>>;
  }

  /** The slots of `job` the model was asked to run, one entry per model request. */
  const askedSlots = (job: string, requests: FakeChatRequest[] = model.requests) =>
    requests.map((r) => slotOf(lastUserText(r), job)).filter((s): s is number => s !== null);
  const botTexts = () =>
    telegram
      .chatLog(USER)
      .filter((e) => e.from === "bot")
      .map((e) => e.text);
  const repliesFor = (job: string, slot: number) =>
    botTexts().filter((t) => t.startsWith(`⏰ ${job}\n`) && slotOf(t, job) === slot);

  it(
    "an --every 2s task fires on schedule and reports to its Telegram chat, marked as the task's",
    async () => {
      await keel(
        "schedule",
        "add",
        "tick",
        "--every",
        "2s",
        "--prompt",
        "tock",
        "--chat",
        `telegram:${USER}`,
      );
      await start();
      await waitFor(() => botTexts().filter((t) => t.startsWith("⏰ tick\n")).length >= 3, {
        timeoutMs: 30_000,
        message: `three fires; chat: ${JSON.stringify(botTexts())}`,
      });
      const slots = botTexts()
        .filter((t) => t.startsWith("⏰ tick\n"))
        .map((t) => slotOf(t, "tick")!);
      // Each reply answers its own slot, on the job's 2 s grid, never one slot twice.
      expect(new Set(slots).size).toBe(slots.length);
      for (const slot of slots) expect((slot - slots[0]!) % 2000).toBe(0);
      expect(botTexts()[0]).toMatch(/^⏰ tick\nok: \[Scheduled task "tick", due .*\]\ntock$/);
      const [listed] = await jobs();
      expect(listed).toMatchObject({ name: "tick", paused: false, failures: 0 });
      expect(Date.parse(listed!.last_fire_at as string)).toBeGreaterThanOrEqual(slots.at(-1)!);
    },
    TEST_TIMEOUT_MS,
  );

  for (const crashPoint of ["after_inbox_commit", "after_reply_queued"]) {
    it(
      `SIGKILL ${crashPoint.replaceAll("_", " ")}: the slot still gets exactly one reply`,
      async () => {
        await keel(
          "schedule",
          "add",
          "tick",
          "--every",
          "2s",
          "--prompt",
          "tock",
          "--chat",
          `telegram:${USER}`,
        );
        const first = await start(crashPoint);
        expect(await first.exitsWithin(30_000)).toBe(true);
        expect(first.exitStatus?.signal).toBe("SIGKILL");
        // The fire that was cut off: its inbox row and the job's cursor were committed together.
        const slot = Date.parse((await jobs())[0]!.last_fire_at as string);
        expect(Number.isNaN(slot)).toBe(false);

        await start();
        await waitFor(() => repliesFor("tick", slot).length >= 1, {
          timeoutMs: 30_000,
          message: `the reply for ${new Date(slot).toISOString()}; chat: ${JSON.stringify(botTexts())}`,
        });
        // Keep going until a later slot answered too: by then a duplicate would have been sent.
        await waitFor(() => botTexts().some((t) => (slotOf(t, "tick") ?? 0) > slot), {
          timeoutMs: 30_000,
          message: "a later slot's reply",
        });
        expect(repliesFor("tick", slot)).toHaveLength(1);
        expect(askedSlots("tick").filter((s) => s === slot)).toHaveLength(1);
      },
      TEST_TIMEOUT_MS,
    );
  }

  /** Adds an every-5s task, keeps the gateway down over three of its slots, then starts it. */
  async function downOverThreeSlots(misfire: string) {
    // The shortest period whose grace (half of it, at least 1 s) a start of the gateway outlasts
    // on a slow machine: the slots missed while down are missed, not late.
    const period = 2000;
    await keel(
      "schedule",
      "add",
      "report",
      "--every",
      `${period / 1000}s`,
      "--prompt",
      "report",
      "--misfire",
      misfire,
    );
    const firstSlot = Date.parse((await jobs())[0]!.next_fire_at as string);
    const lastMissed = firstSlot + 2 * period;
    // Down until every one of the three slots is more than a period old (past any grace).
    await waitFor(() => Date.now() > lastMissed + period, { timeoutMs: 30_000, intervalMs: 200 });
    const startedAt = Date.now();
    await start();
    return { firstSlot, lastMissed, startedAt };
  }

  it(
    "misfire once: a gateway down over three slots runs one catch-up, told how late it is",
    async () => {
      const { firstSlot, lastMissed, startedAt } = await downOverThreeSlots("once");
      // Wait until a slot after the start ran: the catch-up is behind us then.
      await waitFor(() => askedSlots("report").some((s) => s > startedAt), {
        timeoutMs: 40_000,
        message: `a fire after the start; asked: ${askedSlots("report").map((s) => new Date(s).toISOString())}`,
      });
      const missedRuns = model.requests.filter((r) => {
        const slot = slotOf(lastUserText(r), "report");
        return slot !== null && slot < startedAt;
      });
      expect(missedRuns).toHaveLength(1);
      const catchUp = lastUserText(missedRuns[0]!);
      expect(slotOf(catchUp, "report")).toBeGreaterThanOrEqual(lastMissed);
      expect(catchUp).toMatch(/this is a catch-up run/);
      expect(catchUp).toMatch(/[2-9]\d* earlier runs were missed and will not run/);
      expect(askedSlots("report")).not.toContain(firstSlot);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "misfire skip: a gateway down over three slots runs none of them",
    async () => {
      const { lastMissed } = await downOverThreeSlots("skip");
      await waitFor(() => askedSlots("report").length >= 1, {
        timeoutMs: 40_000,
        message: "the next slot's fire",
      });
      for (const slot of askedSlots("report")) expect(slot).toBeGreaterThan(lastMissed);
      expect(model.requests.map(lastUserText).join("\n")).not.toMatch(/catch-up/);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "a one-shot --at task fires once, then is gone; with no chat its session keeps the answer",
    async () => {
      await start();
      await keel("schedule", "add", "once", "--at", "+2s", "--prompt", "just once");
      await waitFor(async () => (await jobs()).length === 0, {
        timeoutMs: 30_000,
        intervalMs: 250,
        message: "the one-shot retired",
      });
      await waitFor(() => askedSlots("once").length === 1, { timeoutMs: 20_000 });
      const sessions = await keel("sessions", "list");
      const line = sessions.split("\n").find((l) => l.includes("agent:main:schedule:once"));
      expect(line, sessions).toBeDefined();
      const id = line!.split(/\s+/)[0]!;
      await waitFor(
        async () =>
          (await keel("sessions", "show", id)).includes('assistant: ok: [Scheduled task "once"'),
        {
          timeoutMs: 20_000,
          message: "the answer in the task's session",
        },
      );
      // It stays gone: nothing fires it again, and nothing was sent to any chat.
      expect(await jobs()).toEqual([]);
      expect(askedSlots("once")).toHaveLength(1);
      expect(botTexts()).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "the agent creates a task with the schedule tool; it reports to the chat that asked",
    async () => {
      model.script((request) => {
        const text = lastUserText(request);
        const answered = request.messages.at(-1)?.role === "tool";
        if (text === "remind me in 2 seconds") {
          return answered
            ? { text: "I'll remind you." }
            : {
                toolCalls: [
                  {
                    name: "schedule",
                    arguments: {
                      action: "create",
                      name: "reminder",
                      at: "+2s",
                      prompt: "echo: time is up",
                    },
                  },
                ],
              };
        }
        return defaultScript(request);
      });
      await start();
      telegram.sendUserMessage({ chatId: USER, text: "remind me in 2 seconds" });
      await waitFor(() => botTexts().includes("I'll remind you."), {
        timeoutMs: 30_000,
        message: `the agent's answer; chat: ${JSON.stringify(botTexts())}`,
      });
      const toolResult = model.requests
        .flatMap((r) => r.messages)
        .find((m) => m.role === "tool")?.content;
      expect(String(toolResult)).toMatch(
        /^Created\. reminder: once at .* reports to telegram:4242/,
      );
      await waitFor(() => botTexts().some((t) => t.startsWith("⏰ reminder\n")), {
        timeoutMs: 30_000,
        message: `the reminder; chat: ${JSON.stringify(botTexts())}`,
      });
      expect(await jobs()).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );
});
