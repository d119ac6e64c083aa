/**
 * Scheduled tasks in a real in-process gateway: a fire that comes during a drain waits in the
 * inbox and runs after it, failing runs are reported and three in a row pause the task, and
 * `/schedules` lists and manages a chat's tasks.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

describe("scheduled tasks in the gateway", () => {
  let home: ReturnType<typeof createTempDir>;
  let model: FakeOpenAI;
  let gw: InProcessGateway;

  beforeEach(async () => {
    home = createTempDir("keel-sched-");
    model = await startFakeOpenAI();
    gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
  });
  afterEach(async () => {
    await gw.shutdown();
    await model.close();
    home.cleanup();
  });

  const chat = { platform: "test", chatId: "1" };
  const labelled = (name: string) =>
    gw.platform.texts("1").filter((t) => t.startsWith(`⏰ ${name}\n`));
  const scheduledRequests = () =>
    model.requests.filter((r) =>
      r.messages.some((m) => typeof m.content === "string" && m.content.startsWith("[Scheduled")),
    );

  it("a fire during a drain stays pending in the inbox and runs once the drain ends", async () => {
    await gw.gateway.drain("drain");
    await gw.gateway.schedules.create({
      name: "tick",
      every: "1s",
      prompt: "tock",
      chat,
      createdBy: "cli",
    });
    const store = gw.gateway.store;
    await waitFor(() => store.hasOpenInbox("schedule", "tick"), {
      timeoutMs: 10_000,
      message: "the fire in the inbox",
    });
    const [held] = (await store.listOpenInbox()).filter((i) => i.platform === "schedule");
    expect(held?.state).toBe("pending");
    // Not refused, not started: nothing reached the model or the chat.
    expect(scheduledRequests()).toHaveLength(0);
    expect(gw.platform.texts("1")).toEqual([]);

    await gw.gateway.drain("cancel");
    await waitFor(() => labelled("tick").length >= 1, {
      timeoutMs: 10_000,
      message: `the held fire's reply; chat: ${JSON.stringify(gw.platform.texts("1"))}`,
    });
    expect(labelled("tick")[0]).toContain(`due ${held!.platformMessageId}`);
  });

  it("failing runs are reported; three in a row pause the task with a notice", async () => {
    // Retry-After 0: the retries of each failing run do not wait.
    model.script({
      error: { status: 500, message: "model down", headers: { "retry-after": "0" } },
    });
    await gw.gateway.schedules.create({
      name: "flaky",
      every: "1s",
      prompt: "try",
      chat,
      createdBy: "cli",
    });
    await waitFor(async () => (await gw.gateway.store.getScheduleJob("flaky"))?.paused, {
      timeoutMs: 30_000,
      message: "the task paused",
    });
    await waitFor(() => gw.platform.texts("1").some((t) => t.includes("is paused after")), {
      timeoutMs: 10_000,
      message: "the pause notice",
    });
    const failures = labelled("flaky");
    expect(failures).toHaveLength(3);
    for (const text of failures) expect(text).toMatch(/The model request failed \(HTTP 500\)/);
    expect(gw.platform.texts("1").at(-1)).toBe(
      "⏰ flaky is paused after 3 failed runs in a row. Resume it with /schedules resume, or keel schedule resume flaky.",
    );
    const job = await gw.gateway.store.getScheduleJob("flaky");
    expect(job).toMatchObject({ paused: true, failures: 3 });
    expect(job?.pausedReason).toMatch(/3 failed runs in a row/);
  });

  it("/schedules lists this chat's tasks and pauses, resumes and deletes one by number", async () => {
    const book = gw.gateway.schedules;
    await book.create({
      name: "a-daily",
      cron: "0 8 * * *",
      tz: "UTC",
      prompt: "x",
      chat,
      createdBy: "cli",
    });
    await book.create({
      name: "b-other",
      every: "1h",
      prompt: "y",
      chat: { platform: "test", chatId: "2" },
      createdBy: "cli",
    });
    await book.create({ name: "c-hourly", every: "1h", prompt: "z", chat, createdBy: "cli" });
    const answer = async (text: string) => {
      const before = gw.platform.texts("1").length;
      await gw.send(text);
      await waitFor(() => gw.platform.texts("1").length > before, { message: text });
      return gw.platform.texts("1").at(-1)!;
    };
    const list = await answer("/schedules");
    expect(list).toMatch(
      /^⏰ Scheduled tasks for this chat:\n1\. a-daily: cron "0 8 \* \* \*" \(UTC\)/,
    );
    expect(list).toMatch(/\n2\. c-hourly: every 1h, active/);
    expect(list).not.toContain("b-other");
    expect(await answer("/schedules pause 2")).toMatch(/^✅ c-hourly: every 1h, paused/);
    expect((await book.list()).find((j) => j.name === "c-hourly")?.paused).toBe(true);
    expect(await answer("/schedules resume 2")).toMatch(/^✅ c-hourly: every 1h, active/);
    expect(await answer("/schedules delete 1")).toBe("🗑 Deleted a-daily.");
    expect((await book.list()).map((j) => j.name)).toEqual(["b-other", "c-hourly"]);
    expect(await answer("/schedules delete 9")).toMatch(/^There is no task number 9\./);
  });
});
