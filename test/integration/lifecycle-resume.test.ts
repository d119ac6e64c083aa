import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { resumeNote } from "../../src/runner/history.js";
import {
  droppedRequestNotice,
  heldBackNotice,
  queuedForAfterRestartText,
  RESTART_NOTICE_AUTO_RESUME,
} from "../../src/runner/lifecycle-texts.js";
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

describe("lifecycle: resume after a restart (in-process gateways on one home)", () => {
  let dir: ReturnType<typeof createTempDir>;
  let fake: FakeOpenAI;
  let running: InProcessGateway[];

  async function boot(options: Partial<InProcessGatewayOptions> = {}): Promise<InProcessGateway> {
    const gw = await startInProcessGateway({
      home: dir.path,
      modelBaseUrl: fake.baseUrl,
      supervisor: "container",
      ...options,
    });
    running.push(gw);
    return gw;
  }

  /** A restart as the control API asks for it; resolves with the exit code (75 in a container). */
  async function restart(gw: InProcessGateway): Promise<number> {
    expect(gw.gateway.requestStop({ restart: true, signalInitiated: false }).accepted).toBe(true);
    return gw.gateway.exited;
  }

  const agentStarted = (gw: InProcessGateway) =>
    gw.gateway.runner.activeTurns().some((t) => t.agentStarted);

  /**
   * Restarts `first` mid-turn, then twice more each resumed turn, with `advance` moving `clock`
   * 31 s on before each boot (slower than a loop the breaker would hold back: three boots in
   * 60 s); returns the fourth gateway, whose start suspends the session.
   */
  async function cutOffThreeTimes(
    first: InProcessGateway,
    clock: () => number,
    advance: () => void,
  ): Promise<InProcessGateway> {
    expect(await restart(first)).toBe(75);
    for (let boots = 2; boots <= 3; boots += 1) {
      advance();
      // The session resumes by itself, and the restart cuts off the resumed turn again.
      const gw = await boot({ now: clock });
      await waitFor(() => agentStarted(gw));
      expect(await restart(gw)).toBe(75);
    }
    advance();
    return boot({ now: clock });
  }

  beforeEach(async () => {
    dir = createTempDir();
    fake = await startFakeOpenAI();
    running = [];
  });

  afterEach(async () => {
    for (const gw of running) await gw.shutdown();
    await fake.close();
    dir.cleanup();
  });

  it("an interrupted session continues by itself after restart, and its reply goes to its chat", async () => {
    const first = await boot();
    const { sessionId } = await first.send("slow: 1500 continued after restart");
    await waitFor(() => agentStarted(first));
    expect(await restart(first)).toBe(75);
    expect(first.platform.texts()).toEqual([RESTART_NOTICE_AUTO_RESUME]);

    const second = await boot();
    await waitFor(() => second.platform.texts().includes("continued after restart"));
    const resumeRequest = fake.requests.at(-1)!;
    expect(resumeRequest.messages.at(-1)).toMatchObject({
      role: "system",
      content: resumeNote("restart_timeout"),
    });
    const transcript = await second.gateway.store.loadTranscript(sessionId);
    expect(transcript.map((m) => [m.message.role, m.message.content])).toEqual([
      ["user", "slow: 1500 continued after restart"],
      ["assistant", "continued after restart"],
    ]);
    await waitFor(async () => {
      const session = await second.gateway.store.getSession(testSessionKey());
      return session?.resumePending === false;
    });
  });

  it("a follow-up queued during a restart runs after the restart", async () => {
    const env = { KEEL_GATEWAY_BUSY_INPUT_MODE: "queue", KEEL_RESTART_DRAIN_TIMEOUT: "30" };
    const first = await boot({ env });
    await first.send("slow: 1200 first answer");
    await waitFor(() => agentStarted(first));
    expect(first.gateway.requestStop({ restart: true, signalInitiated: false }).accepted).toBe(
      true,
    );
    // The notice goes out once admission is closed.
    await waitFor(() => first.platform.texts().includes(RESTART_NOTICE_AUTO_RESUME));
    await first.send("echo: the follow-up");
    await waitFor(() => first.platform.texts().includes(queuedForAfterRestartText(true)));
    expect(await first.gateway.exited).toBe(75);
    expect(first.platform.texts()).toContain("first answer");
    expect(first.platform.texts()).not.toContain("the follow-up");

    const second = await boot({ env });
    await waitFor(() => second.platform.texts().includes("the follow-up"));
    expect(second.platform.texts().filter((t) => t === "the follow-up")).toHaveLength(1);
  });

  it("a session cut off by three restarts in a row is suspended, told which request was dropped; its next message starts fresh", async () => {
    let now = Date.now();
    const clock = () => now;
    const first = await boot({ now: clock });
    const { sessionId } = await first.send("slow: 30000 never finishes");
    await waitFor(() => agentStarted(first));
    const fourth = await cutOffThreeTimes(first, clock, () => {
      now += 31_000;
    });
    const session = await fourth.gateway.store.getSession(testSessionKey());
    expect(session).toMatchObject({ suspended: true, resumePending: false });
    expect(fourth.gateway.runner.activeTurns()).toEqual([]);
    const dropped = droppedRequestNotice("slow: 30000 never finishes");
    await waitFor(() => fourth.platform.texts().includes(dropped));

    await fourth.send("echo: hello again");
    await waitFor(() => fourth.platform.texts().includes("hello again"));
    expect(fourth.platform.texts()).toEqual([dropped, "hello again"]);
    const fresh = await fourth.gateway.store.getSession(testSessionKey());
    expect(fresh?.sessionId).not.toBe(sessionId);
    expect(fake.requests.at(-1)?.messages.filter((m) => m.role !== "system")).toEqual([
      { role: "user", content: "echo: hello again" },
    ]);
  });

  it("a suspended session with two messages cut off names both as dropped, and /retry runs both", async () => {
    let now = Date.now();
    const clock = () => now;
    const first = await boot({ now: clock, env: { KEEL_GATEWAY_BUSY_INPUT_MODE: "interrupt" } });
    await first.send("slow: 30000 the first request");
    // Its model call under way, not only its turn: a message before the call would be carried
    // into a turn that calls the model once, for both.
    await waitFor(() => fake.requests.length === 1 && agentStarted(first));
    // It interrupts the first, whose turn it then carries: both are in the transcript, neither
    // answered, when the restarts cut it off.
    await first.send("slow: 30000 the second request");
    await waitFor(() => fake.requests.length >= 2 && agentStarted(first));
    const fourth = await cutOffThreeTimes(first, clock, () => {
      now += 31_000;
    });
    const both = "slow: 30000 the first request\n\nslow: 30000 the second request";
    await waitFor(() => fourth.platform.texts().includes(droppedRequestNotice(both)), {
      message: `the dropped notice; chat: ${JSON.stringify(fourth.platform.texts())}`,
    });

    await fourth.send("/retry");
    await waitFor(() =>
      fake.requests.some((r) => r.messages.some((m) => m.role === "user" && m.content === both)),
    );
    const retried = fake.requests.at(-1)!.messages.filter((m) => m.role !== "system");
    expect(retried).toEqual([{ role: "user", content: both }]);
  });

  it("the restart-loop breaker holds back resumes on the third boot within the window, tells the chat once, and the markers stay", async () => {
    let now = Date.now();
    const clock = () => now;
    const seedInterrupted = async (chatId: string) => {
      const store = new SqliteStore(join(dir.path, "state.db"), { now: clock });
      const { item } = await store.acceptInbound({
        platform: "test",
        chatId,
        platformMessageId: `seed-${chatId}`,
        sessionKey: testSessionKey(chatId),
        text: `echo: resumed ${chatId}`,
        address: { platform: "test", chatId },
      });
      const turn = await store.startTurn({
        sessionKey: testSessionKey(chatId),
        inboxId: item.id,
        userMessage: { role: "user", content: `echo: resumed ${chatId}` },
      });
      await store.finishTurn({
        turnId: turn.id,
        state: "interrupted",
        finalMessage: null,
        reply: null,
      });
      await store.markResumePending([testSessionKey(chatId)], "restart_timeout");
      await store.close();
    };
    // A clean-shutdown marker keeps recovery from marking anything else.
    const cleanStart = () => writeFileSync(join(dir.path, ".clean_shutdown"), String(now));

    for (const [index, chatId] of ["a", "b"].entries()) {
      await seedInterrupted(chatId);
      cleanStart();
      const gw = await boot({ now: clock });
      await waitFor(() => gw.platform.texts(chatId).includes(`resumed ${chatId}`));
      expect(await gw.shutdown()).toBe(0);
      now += 10_000 * (index + 1);
    }
    await seedInterrupted("c");
    cleanStart();
    const tripped = await boot({ now: clock });
    await waitFor(async () => (await tripped.gateway.store.listPendingOutbox()).length === 0);
    expect(tripped.gateway.runner.activeTurns()).toEqual([]);
    // Held back, not dropped: the chat is told once, and the request stays resume-pending.
    expect(tripped.platform.texts()).toEqual([heldBackNotice("echo: resumed c", 60)]);
    expect((await tripped.gateway.store.getSession(testSessionKey("c")))?.resumePending).toBe(true);
    expect(await tripped.shutdown()).toBe(0);

    // Outside the window the marker left behind resumes as usual, without a second notice.
    now += 120_000;
    cleanStart();
    const later = await boot({ now: clock });
    await waitFor(() => later.platform.texts("c").includes("resumed c"));
    expect(later.platform.texts("c")).toEqual(["resumed c"]);
  });
});
