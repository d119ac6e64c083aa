import pino from "pino";
import { describe, expect, it } from "vitest";
import { FakeStopParticipants } from "../../test/fakes/fake-stop-participants.js";
import {
  RESTART_NOTICE,
  RESTART_NOTICE_AUTO_RESUME,
  restartCommandReply,
  STOP_NOTICE,
} from "../runner/lifecycle-texts.js";
import {
  planStopEpilogue,
  runStopSequence,
  type StopRequest,
  writesCleanShutdown,
} from "./stop-sequence.js";

const logger = pino({ level: "silent" });
const FAST = {
  notifyMs: 100,
  markMs: 100,
  interruptGraceMs: 100,
  killMs: 100,
  disconnectMs: 100,
  persistMs: 100,
};
const dm = (chatId: string, threadId?: string) => ({
  platform: "telegram",
  chatId,
  ...(threadId ? { threadId } : {}),
});

function turn(key: string, chatId: string, agentStarted = true, threadId?: string) {
  return { sessionKey: key, address: dm(chatId, threadId), agentStarted };
}

describe("stop sequence", () => {
  it("closes admission before anything else", async () => {
    const gw = new FakeStopParticipants([turn("a", "1")]);
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.calls[0]).toBe("closeAdmission");
  });

  it("sends a shutdown notice to a chat with a running turn", async () => {
    const gw = new FakeStopParticipants([turn("agent:main:telegram:dm:999", "999")]);
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 0,
      logger,
      budgets: FAST,
    });
    expect(gw.sent).toEqual([{ address: dm("999"), text: STOP_NOTICE }]);
    expect(summary.noticesSent).toBe(1);
  });

  it("says restarting and how the session resumes when a restart was requested", async () => {
    const gw = new FakeStopParticipants([turn("a", "999")]);
    await runStopSequence(gw, { restart: true, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.sent.map((s) => s.text)).toEqual([RESTART_NOTICE]);
    const auto = new FakeStopParticipants([turn("a", "999")]);
    await runStopSequence(auto, {
      restart: true,
      autoResume: true,
      drainTimeoutMs: 0,
      logger,
      budgets: FAST,
    });
    expect(auto.sent.map((s) => s.text)).toEqual([RESTART_NOTICE_AUTO_RESUME]);
  });

  it("sends one notice per chat even when several sessions share it", async () => {
    const gw = new FakeStopParticipants([
      turn("g:chat1:u1", "chat1"),
      turn("g:chat1:u2", "chat1"),
      turn("t", "chat1", true, "7"),
    ]);
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.sent.map((s) => s.address)).toEqual([dm("chat1"), dm("chat1", "7")]);
  });

  it("sends nothing when no turn runs", async () => {
    const gw = new FakeStopParticipants();
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 0,
      logger,
      budgets: FAST,
      homeChannels: [dm("home")],
    });
    expect(gw.sent).toEqual([]);
    expect(summary.clean).toBe(true);
  });

  it("does not notify or mark a session whose agent has not started yet", async () => {
    const gw = new FakeStopParticipants([turn("pending", "999", false)]);
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.sent).toEqual([]);
    expect(gw.marked).toEqual([]);
  });

  it("a failed send does not block the stop", async () => {
    const gw = new FakeStopParticipants([turn("a", "1")]);
    gw.failSends = true;
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 0,
      logger,
      budgets: FAST,
    });
    expect(summary.noticesSent).toBe(0);
    expect(gw.calls).toContain("disconnectPlatforms");
  });

  it("a hung send is cut off by its own timeout", async () => {
    const gw = new FakeStopParticipants([turn("a", "1")]);
    gw.hang.add("notify");
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.calls).toContain("disconnectPlatforms");
  });

  it("marks running sessions resume-pending before waiting for them", async () => {
    const gw = new FakeStopParticipants([turn("a", "1"), turn("b", "2")]);
    setTimeout(() => {
      gw.finish("a");
      gw.finish("b");
    }, 30);
    await runStopSequence(gw, { restart: true, drainTimeoutMs: 5000, logger, budgets: FAST });
    expect(gw.marked).toEqual([{ keys: ["a", "b"], reason: "restart_timeout" }]);
    expect(gw.calls.indexOf("markResumePending")).toBeLessThan(
      gw.calls.indexOf("waitForIdle(5000)"),
    );
  });

  it("marks with shutdown_timeout for a stop", async () => {
    const gw = new FakeStopParticipants([turn("a", "1")]);
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.marked).toEqual([{ keys: ["a"], reason: "shutdown_timeout" }]);
  });

  it("lets turns that finish within the drain timeout finish, uninterrupted, and clears their marks", async () => {
    const gw = new FakeStopParticipants([turn("session", "1")]);
    setTimeout(() => gw.finish("session"), 50);
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 5000,
      logger,
      budgets: FAST,
    });
    expect(gw.interruptReasons).toEqual([]);
    expect(gw.cleared).toEqual([["session"]]);
    expect(summary).toMatchObject({ clean: true, interrupted: [] });
    expect(gw.calls).toContain("disconnectPlatforms");
  });

  it("interrupts what still runs after the drain timeout", async () => {
    const gw = new FakeStopParticipants([turn("session", "1")]);
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 50,
      logger,
      budgets: FAST,
    });
    expect(gw.interruptReasons).toEqual(["Gateway shutting down"]);
    expect(summary).toMatchObject({ clean: false, interrupted: ["session"] });
    expect(gw.calls).toContain("disconnectPlatforms");
  });

  it("with a drain timeout of 0 interrupts at once without waiting", async () => {
    const gw = new FakeStopParticipants([turn("session", "1")]);
    await runStopSequence(gw, { restart: true, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.calls.filter((c) => c.startsWith("waitForIdle"))).toEqual([
      `waitForIdle(${FAST.interruptGraceMs})`,
    ]);
    expect(gw.interruptReasons).toEqual(["Gateway restarting"]);
  });

  it("kills tool subprocesses before disconnecting platforms when the drain times out", async () => {
    const gw = new FakeStopParticipants([turn("session", "1")]);
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 10, logger, budgets: FAST });
    expect(gw.calls.indexOf("killToolProcesses")).toBeGreaterThan(-1);
    expect(gw.calls.indexOf("killToolProcesses")).toBeLessThan(
      gw.calls.indexOf("disconnectPlatforms"),
    );
  });

  it("kills tool subprocesses exactly once on the graceful path too", async () => {
    const gw = new FakeStopParticipants();
    await runStopSequence(gw, { restart: false, drainTimeoutMs: 0, logger, budgets: FAST });
    expect(gw.calls.filter((c) => c === "killToolProcesses")).toHaveLength(1);
    expect(gw.calls.indexOf("killToolProcesses")).toBeLessThan(
      gw.calls.indexOf("disconnectPlatforms"),
    );
  });

  it("answers the /restart message in the chat it came from, and sends home channels nothing extra", async () => {
    const gw = new FakeStopParticipants([turn("s", "42", true, "9")]);
    const restartCommand = { ...dm("42", "9"), replyToMessageId: "restart-command" };
    await runStopSequence(gw, {
      restart: true,
      drainTimeoutMs: 0,
      restartCommand,
      homeChannels: [dm("home-chat")],
      logger,
      budgets: FAST,
    });
    expect(gw.sent).toEqual([{ address: restartCommand, text: RESTART_NOTICE }]);
  });

  it("an idle gateway restarted from chat sends no interruption notice", async () => {
    const gw = new FakeStopParticipants();
    await runStopSequence(gw, {
      restart: true,
      drainTimeoutMs: 0,
      restartCommand: { ...dm("42"), replyToMessageId: "m" },
      homeChannels: [dm("42")],
      logger,
      budgets: FAST,
    });
    expect(gw.sent).toEqual([]);
  });

  it("home channels get the notice when a restart not asked from chat cuts off a turn", async () => {
    const gw = new FakeStopParticipants([turn("s", "1")]);
    await runStopSequence(gw, {
      restart: true,
      drainTimeoutMs: 0,
      homeChannels: [dm("home"), dm("1")],
      logger,
      budgets: FAST,
    });
    expect(gw.sent.map((s) => s.address.chatId)).toEqual(["1", "home"]);
  });

  it("finishes even when every participant hangs, and reports the steps that did", async () => {
    const gw = new FakeStopParticipants([turn("s", "1")]);
    for (const name of [
      "notify",
      "markResumePending",
      "waitForIdle",
      "interruptAll",
      "killToolProcesses",
      "disconnectPlatforms",
    ] as const) {
      gw.hang.add(name);
    }
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 50,
      logger,
      budgets: FAST,
    });
    expect(summary.clean).toBe(false);
    expect(summary.failedSteps).toEqual(
      expect.arrayContaining([
        "mark_resume_pending",
        "drain",
        "interrupt",
        "kill_tool_processes",
        "disconnect_platforms",
      ]),
    );
    expect(gw.persisted).toEqual(summary);
  });

  it("persists last, with the summary", async () => {
    const gw = new FakeStopParticipants();
    const summary = await runStopSequence(gw, {
      restart: false,
      drainTimeoutMs: 0,
      logger,
      budgets: FAST,
    });
    expect(gw.calls.at(-1)).toBe("persist");
    expect(gw.persisted).toEqual(summary);
  });
});

describe("/restart replies", () => {
  it("reports the drain count while turns run", () => {
    expect(restartCommandReply({ alreadyRequested: false, activeTurns: 1 })).toBe(
      "⏳ Draining 1 active agent(s) before restart...",
    );
    expect(restartCommandReply({ alreadyRequested: true, activeTurns: 2 })).toBe(
      "⏳ Draining 2 active agent(s) before restart...",
    );
    expect(restartCommandReply({ alreadyRequested: true, activeTurns: 0 })).toBe(
      "⏳ Gateway restart already in progress...",
    );
  });
});

describe("stop epilogue", () => {
  const base: StopRequest = {
    restart: false,
    detached: false,
    viaService: false,
    signalInitiated: false,
    restartCommand: null,
  };
  const plan = (
    request: Partial<StopRequest>,
    supervisor: "systemd" | "launchd" | "container" | null = null,
  ) => planStopEpilogue({ request: { ...base, ...request }, supervisor, now: 77 });

  it("an unexpected SIGTERM persists running and exits 1", () => {
    expect(plan({ signalInitiated: true })).toMatchObject({ gatewayState: "running", exitCode: 1 });
  });

  it("a planned stop persists stopped and exits 0", () => {
    expect(plan({})).toMatchObject({ gatewayState: "stopped", exitCode: 0 });
  });

  it("a signal-initiated restart still persists stopped", () => {
    expect(
      plan({ restart: true, viaService: true, signalInitiated: true }, "systemd").gatewayState,
    ).toBe("stopped");
  });

  it("a restart under systemd exits 0, schedules the unit restart and writes restart-pending", () => {
    expect(plan({ restart: true, viaService: true }, "systemd")).toMatchObject({
      exitCode: 0,
      scheduleSystemdRestart: true,
      launchDetachedSuccessor: false,
      restartPending: { requested_at: 77, via_service: true, detached: false },
    });
  });

  it("a restart under launchd or in a container exits 75", () => {
    expect(plan({ restart: true, viaService: true }, "launchd").exitCode).toBe(75);
    expect(plan({ restart: true, viaService: true }, "container").exitCode).toBe(75);
  });

  it("a restart outside a supervisor launches the detached successor and exits 0", () => {
    expect(plan({ restart: true, detached: true })).toMatchObject({
      exitCode: 0,
      launchDetachedSuccessor: true,
    });
  });

  it("a restart asked from a chat does not write the home-channel restart marker", () => {
    expect(
      plan({ restart: true, viaService: true, restartCommand: dm("1") }, "systemd").restartPending,
    ).toBeNull();
  });

  it("writes .clean_shutdown only when nothing was cut off, and never after a failed store", () => {
    expect(writesCleanShutdown(plan({}), { clean: true })).toBe(true);
    expect(writesCleanShutdown(plan({}), { clean: false })).toBe(false);
    expect(
      writesCleanShutdown(plan({ signalInitiated: true, storeFailed: true }), { clean: true }),
    ).toBe(false);
  });

  it("records why the gateway stopped", () => {
    expect(plan({}).exitReason).toBe("planned_stop");
    expect(plan({ signalInitiated: true }).exitReason).toBe("signal");
    expect(plan({ signalInitiated: true, storeFailed: true }).exitReason).toBe("store_failed");
    expect(plan({ restart: true, signalInitiated: true }).exitReason).toBe("restart");
  });
});
