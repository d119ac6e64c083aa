/**
 * The restart-loop breaker defers, never drops: real gateways in this process on one home, a
 * fake model, the gateway's clock and timer seams. The boot history is primed with two recent
 * boots so the next start trips the breaker; "the stable window elapses" is firing the timer the
 * gateway scheduled.
 */
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordBoot } from "../../src/recovery/boot-history.js";
import { resumeNote } from "../../src/runner/history.js";
import { heldBackNotice } from "../../src/runner/lifecycle-texts.js";
import { SqliteStore } from "../../src/sessions/sqlite-store.js";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type InProcessGateway,
  type InProcessGatewayOptions,
  startInProcessGateway,
  testSessionKey,
} from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";
import { waitFor } from "../helpers/wait-for.js";

interface Timer {
  fn: () => void;
  ms: number;
  cancelled: boolean;
}

describe("restart-loop breaker: held back, told once, resumed once the gateway is stable", () => {
  let dir: ReturnType<typeof createTempDir>;
  let fake: FakeOpenAI;
  let running: InProcessGateway[];
  let now: number;
  let timers: Timer[];
  const clock = () => now;
  const schedule = (fn: () => void, ms: number) => {
    const timer = { fn, ms, cancelled: false };
    timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  };
  /** The gateway has stayed up for the breaker window. */
  const elapse = () => {
    for (const timer of timers.splice(0)) if (!timer.cancelled) timer.fn();
  };

  async function boot(options: Partial<InProcessGatewayOptions> = {}): Promise<InProcessGateway> {
    const gw = await startInProcessGateway({
      home: dir.path,
      modelBaseUrl: fake.baseUrl,
      now: clock,
      schedule,
      ...options,
    });
    running.push(gw);
    return gw;
  }

  /** A turn answering `echo: resumed <chat>` (message `m-<chat>`) cut off by a crash. */
  async function seedInterrupted(chatId: string): Promise<void> {
    const store = new SqliteStore(join(dir.path, "state.db"), { now: clock });
    const address = { platform: "test", chatId, replyToMessageId: `m-${chatId}` };
    const { item } = await store.acceptInbound({
      platform: "test",
      chatId,
      platformMessageId: `m-${chatId}`,
      sessionKey: testSessionKey(chatId),
      text: `echo: resumed ${chatId}`,
      address,
    });
    const turn = await store.startTurn({
      sessionKey: testSessionKey(chatId),
      inboxId: item.id,
      userMessage: { role: "user", content: `echo: resumed ${chatId}` },
      origin: address,
    });
    await store.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });
    await store.markResumePending([testSessionKey(chatId)], "restart_interrupted");
    await store.close();
  }

  /** Two boots with resumable sessions in the last 20 s, and a clean marker (nothing else marked). */
  async function primeCrashLoop(): Promise<void> {
    await recordBoot(dir.path, now - 20_000, 60_000);
    await recordBoot(dir.path, now - 10_000, 60_000);
    writeFileSync(join(dir.path, ".clean_shutdown"), String(now));
  }

  const replies = (gw: InProcessGateway, chatId: string) =>
    gw.platform.delivered
      .filter((d) => d.kind === "reply" && d.address.chatId === chatId)
      .map((d) => d.text);
  const notices = (gw: InProcessGateway, chatId: string) =>
    gw.platform.delivered.filter(
      (d) => d.address.chatId === chatId && d.text.startsWith("⏸ The gateway restarted"),
    );
  const pending = async (gw: InProcessGateway, chatId: string) =>
    (await gw.gateway.store.getSession(testSessionKey(chatId)))?.resumePending;

  beforeEach(async () => {
    dir = createTempDir();
    fake = await startFakeOpenAI();
    running = [];
    now = Date.now();
    timers = [];
  });

  afterEach(async () => {
    for (const gw of running) await gw.shutdown();
    await fake.close();
    dir.cleanup();
  });

  it("trips: nothing resumes, each chat gets one notice answering its interrupted message, and the window resumes them", async () => {
    await seedInterrupted("a");
    await seedInterrupted("b");
    await primeCrashLoop();
    const gw = await boot();
    await waitFor(() => gw.platform.delivered.length === 2);
    for (const chat of ["a", "b"]) {
      expect(notices(gw, chat).map((d) => [d.text, d.address.replyToMessageId])).toEqual([
        [heldBackNotice(`echo: resumed ${chat}`, 60), `m-${chat}`],
      ]);
      expect(await pending(gw, chat)).toBe(true);
    }
    expect(gw.gateway.runner.activeTurns()).toEqual([]);
    expect(fake.requests).toHaveLength(0);
    expect(timers.map((t) => t.ms)).toEqual([60_000]);

    elapse();
    await waitFor(() => replies(gw, "a").length === 1 && replies(gw, "b").length === 1);
    expect(replies(gw, "a")).toEqual(["resumed a"]);
    const answer = gw.platform.delivered.find((d) => d.text === "resumed a");
    expect(answer?.address.replyToMessageId).toBe("m-a");
    expect(fake.requests.map((r) => r.messages.at(-1)?.content)).toEqual([
      resumeNote("restart_interrupted"),
      resumeNote("restart_interrupted"),
    ]);
    await waitFor(async () => (await pending(gw, "a")) === false && !(await pending(gw, "b")));
    expect(notices(gw, "a")).toHaveLength(1);
  });

  it("a crash before the window leaves them pending: the next start neither notifies again nor loses or doubles the resume", async () => {
    await seedInterrupted("a");
    await primeCrashLoop();
    const first = await boot();
    await waitFor(() => first.platform.delivered.length === 1);
    expect(await first.shutdown()).toBe(0);
    // As after a crash: no clean-shutdown marker.
    rmSync(join(dir.path, ".clean_shutdown"), { force: true });
    now += 5_000;

    const second = await boot();
    expect(await pending(second, "a")).toBe(true);
    expect(await second.gateway.store.listPendingOutbox()).toEqual([]);
    elapse();
    await waitFor(() => replies(second, "a").length === 1);
    expect(second.platform.delivered.map((d) => d.text)).toEqual(["resumed a"]);
    const session = await second.gateway.store.getSession(testSessionKey("a"));
    const transcript = await second.gateway.store.loadTranscript(session!.sessionId);
    expect(transcript.map((m) => [m.message.role, m.message.content])).toEqual([
      ["user", "echo: resumed a"],
      ["assistant", "resumed a"],
    ]);
    expect(fake.requests).toHaveLength(1);
  });

  it.each(["queue", "steer"] as const)(
    "in %s mode a new message into a held-back session runs after the resume: two turns, two replies",
    async (mode) => {
      await seedInterrupted("a");
      await primeCrashLoop();
      const gw = await boot({ env: { KEEL_GATEWAY_BUSY_INPUT_MODE: mode } });
      await waitFor(() => notices(gw, "a").length === 1);
      await gw.send("echo: new one", "a");
      await waitFor(() => replies(gw, "a").length === 2);
      expect(replies(gw, "a")).toEqual(["resumed a", "new one"]);
      expect(fake.requests.map((r) => r.messages.at(-1)?.content)).toEqual([
        resumeNote("restart_interrupted"),
        "echo: new one",
      ]);
      // The window changes nothing more: the request was answered.
      elapse();
      await gw.send("echo: after", "a");
      await waitFor(() => replies(gw, "a").includes("after"));
      expect(fake.requests).toHaveLength(3);
    },
  );

  it("in interrupt mode the new message's turn carries the held-back request with the note", async () => {
    await seedInterrupted("a");
    await primeCrashLoop();
    const gw = await boot({ env: { KEEL_GATEWAY_BUSY_INPUT_MODE: "interrupt" } });
    await waitFor(() => notices(gw, "a").length === 1);
    await gw.send("echo: new one", "a");
    await waitFor(() => replies(gw, "a").length === 1);
    expect(replies(gw, "a")).toEqual(["new one"]);
    const input = fake.requests[0]!.messages.slice(1); // after the agent's system prompt
    expect(input.map((m) => m.content)).toEqual([
      "echo: resumed a",
      resumeNote("restart_interrupted"),
      "echo: new one",
    ]);
    expect(await pending(gw, "a")).toBe(false);
    elapse();
    await gw.send("echo: after", "a");
    await waitFor(() => replies(gw, "a").includes("after"));
    expect(fake.requests).toHaveLength(2);
  });

  it("/retry in a held-back session continues the request now, answering it", async () => {
    await seedInterrupted("a");
    await primeCrashLoop();
    const gw = await boot();
    await waitFor(() => notices(gw, "a").length === 1);
    await gw.send("/retry", "a");
    await waitFor(() => replies(gw, "a").length === 1);
    expect(gw.platform.delivered.find((d) => d.text === "resumed a")?.address).toMatchObject({
      replyToMessageId: "m-a",
    });
    elapse();
    await gw.send("echo: after", "a");
    await waitFor(() => replies(gw, "a").includes("after"));
    expect(replies(gw, "a")).toEqual(["resumed a", "after"]);
    expect(fake.requests).toHaveLength(2);
  });
});
