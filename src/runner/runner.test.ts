import { fsync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { contentText } from "../agent/content.js";
import type { ChatMessage, TurnResult } from "../agent/types.js";
import type { InboundMessage } from "../contract/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { AgentRun, AgentRunInput } from "./agent-run.js";
import { AUTO_CONTINUE_NOTE, resumeNote } from "./history.js";
import {
  DRAIN_REFUSAL,
  drainingBeforeRestartText,
  notAcceptingText,
  queuedForAfterRestartText,
  SUSPENDED_NOTICE,
} from "./lifecycle-texts.js";
import { OutboxDispatcher } from "./outbox-dispatcher.js";
import { type BusyInputMode, Runner, type RunnerOptions } from "./runner.js";
import { TEXT } from "./texts.js";

/** A bound on waiting for turns to end, not a speed check: a loaded machine may need seconds. */
const IDLE_WAIT_MS = 15_000;

/**
 * A scripted agent: replies "echo: <last user text>", or waits for abort when the text says
 * "block". Records each turn's model input in `seen` and its abort signal in `signals`.
 */
function scriptedAgent(seen: ChatMessage[][], signals: AbortSignal[] = []): AgentRun {
  return async (input: AgentRunInput): Promise<TurnResult> => {
    seen.push(input.history);
    signals.push(input.signal);
    const last = [...input.history].reverse().find((m) => m.role === "user");
    const text = contentText(last?.content ?? "");
    if (text.startsWith("block")) {
      await input.journal.recordMessages([]);
      await new Promise<void>((resolve) => {
        const check = setInterval(() => {
          const steered = input.takeSteeredInput();
          if (steered.length > 0) {
            clearInterval(check);
            input.journal
              .recordMessages(steered.map((s) => ({ role: "user", content: s })))
              .then(() => resolve());
          }
        }, 10);
        input.signal.addEventListener("abort", () => {
          clearInterval(check);
          resolve();
        });
        // Aborted while its first step was being recorded: the listener came too late.
        if (input.signal.aborted) {
          clearInterval(check);
          resolve();
        }
      });
      if (input.signal.aborted)
        return { stopReason: "aborted", reply: "", finalMessage: null, iterations: 1 };
      return {
        stopReason: "stop",
        reply: "steered",
        finalMessage: { role: "assistant", content: "steered" },
        iterations: 1,
      };
    }
    if (text.startsWith("pause")) {
      // A short turn that an interruption can still cut off.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        input.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (input.signal.aborted)
        return { stopReason: "aborted", reply: "", finalMessage: null, iterations: 1 };
    }
    input.onEvent({ type: "text_delta", text: `echo: ${text}` });
    return {
      stopReason: "stop",
      reply: `echo: ${text}`,
      finalMessage: { role: "assistant", content: `echo: ${text}` },
      iterations: 1,
    };
  };
}

describe("Runner", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let adapter: RecordingAdapter;
  let seen: ChatMessage[][];
  let signals: AbortSignal[];
  let nextId: number;
  let runnerClock: number;

  function makeRunner(
    mode: BusyInputMode = "interrupt",
    agent: AgentRun | null = scriptedAgent(seen, signals),
    extra: Partial<RunnerOptions> = {},
  ) {
    const logger = pino({ level: "silent" });
    const dispatcher = new OutboxDispatcher({
      store,
      logger,
      crashPoint: () => {},
      retryDelayMs: 20,
    });
    dispatcher.register(adapter);
    const runner = new Runner({
      store,
      agent,
      isReadOnlyTool: () => false,
      busyInputMode: mode,
      maxConcurrentTurns: 4,
      autoResumeFreshnessMs: 3_600_000,
      logger,
      control: { requestRestart: async () => "restarting", setHomeChannel: async () => {} },
      onReplyQueued: () => dispatcher.kick(),
      crashPoint: () => {},
      now: () => runnerClock,
      ...extra,
    });
    return runner;
  }

  function msg(text: string, chatId = "1"): InboundMessage {
    nextId += 1;
    return {
      platform: "test",
      chatId,
      platformMessageId: String(nextId),
      sessionKey: `agent:main:test:dm:${chatId}`,
      text,
      address: { platform: "test", chatId },
    };
  }

  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
    adapter = new RecordingAdapter();
    seen = [];
    signals = [];
    nextId = 0;
    runnerClock = Date.now();
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  it("stores the message, runs a turn and delivers the reply through the outbox", async () => {
    const runner = makeRunner();
    const result = await runner.receive(msg("hi"));
    expect(result.accepted).toBe(true);
    await waitFor(() => adapter.texts().includes("echo: hi"));
    const transcript = await store.loadTranscript(result.sessionId);
    expect(transcript.map((m) => m.message.content)).toEqual(["hi", "echo: hi"]);
    await waitFor(async () => (await store.listPendingOutbox()).length === 0);
  });

  it("starts a message's turn while its commit is still being flushed, and acknowledges it only once flushed", async () => {
    await store.close();
    let holding = false;
    const held: (() => void)[] = [];
    store = new SqliteStore(join(dir.path, "held.db"), {
      fsync: (fd, done) => (holding ? held.push(() => done(null)) : fsync(fd, done)),
    });
    // The store's first flush (of what an earlier process may have left) is not the one held.
    await store.listOpenInbox();
    holding = true;
    const runner = makeRunner();
    let acknowledged = false;
    const receiving = runner.receive(msg("hi")).then((result) => {
      acknowledged = true;
      return result;
    });
    // The agent has the message: its turn began before the inbox commit reached the disk.
    await waitFor(() => seen.length === 1);
    expect(acknowledged).toBe(false);
    holding = false;
    for (const release of held.splice(0)) release();
    expect((await receiving).accepted).toBe(true);
    await waitFor(() => adapter.texts().includes("echo: hi"));
  });

  it("a message another runner on the store already started is not run again, and nothing fails", async () => {
    // Two gateways on one store: B dispatches a message A has already answered (B took it for a
    // dead gateway's while A was only slow).
    const { item } = await store.acceptInbound(msg("hi"));
    const a = makeRunner();
    await a.dispatchOpenInbox();
    await waitFor(() => adapter.texts().includes("echo: hi"));
    await a.waitForIdle(IDLE_WAIT_MS);
    const b = makeRunner();
    const ends: string[] = [];
    b.onEvent((event) => {
      if (event.type === "turn_end") ends.push(event.stopReason);
    });
    expect(await b.dispatchOpenInbox(async () => [item])).toBe(1);
    expect(await b.waitForIdle(IDLE_WAIT_MS)).toBe(true);
    expect(seen).toHaveLength(1);
    expect(ends).toEqual([]);
    await waitFor(async () => (await store.listPendingOutbox()).length === 0);
    expect(adapter.texts()).toEqual(["echo: hi"]);
  });

  it("ignores a redelivered message", async () => {
    const runner = makeRunner();
    const m = msg("once");
    await runner.receive(m);
    expect((await runner.receive(m)).accepted).toBe(false);
    await waitFor(() => adapter.texts().includes("echo: once"));
    await runner.waitForIdle(IDLE_WAIT_MS);
    expect(adapter.texts().filter((t) => t === "echo: once")).toHaveLength(1);
  });

  it("answers without a model configured with how to configure one", async () => {
    const runner = makeRunner("interrupt", null);
    await runner.receive(msg("hello"));
    await waitFor(() => adapter.texts().includes(TEXT.noModel));
  });

  it("names why it refuses work, and reports each refusal of a stored message while the chat gets its text", async () => {
    const refusals: { refusal: string; inboxId: number }[] = [];
    const listen = (runner: Runner) =>
      runner.onEvent((e) => {
        if (e.type === "refused") refusals.push({ refusal: e.refusal, inboxId: e.inboxId });
      });
    const noModel = makeRunner("interrupt", null);
    listen(noModel);
    expect(noModel.refusalFor("hello")).toBe("no_model");
    expect(noModel.refusalFor("/help")).toBeNull();
    const a = await noModel.receive(msg("hello"));
    await waitFor(() => adapter.texts().includes(TEXT.noModel));

    const runner = makeRunner();
    listen(runner);
    expect(runner.refusalFor("hello")).toBeNull();
    runner.setDraining(true);
    expect(runner.refusalFor("hello")).toBe("draining");
    const b = await runner.receive(msg("while drained"));
    await waitFor(() => adapter.texts().includes(DRAIN_REFUSAL));
    runner.setAdmission("stopping");
    expect(runner.refusalFor("hello")).toBe("stopping");
    expect(runner.refusalFor("/status")).toBeNull();
    const c = await runner.receive(msg("while stopping"));
    await waitFor(() => adapter.texts().includes(notAcceptingText(false)));
    runner.setAdmission("restarting");
    expect(runner.refusalFor("hello")).toBe("restarting");
    expect(refusals).toEqual([
      { refusal: "no_model", inboxId: a.inboxId },
      { refusal: "draining", inboxId: b.inboxId },
      { refusal: "stopping", inboxId: c.inboxId },
    ]);
  });

  it("tells why an aborted turn ended: a stop is 'shutdown', a newer message 'interrupt'", async () => {
    const runner = makeRunner();
    const causes: (string | null)[] = [];
    runner.onEvent((e) => {
      if (e.type === "turn_end") causes.push(e.abortCause);
    });
    await runner.receive(msg("block one"));
    await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
    await runner.receive(msg("newer"));
    await waitFor(() => causes.length === 2);
    await runner.receive(msg("block two"));
    await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
    runner.interruptAll("shutdown");
    await waitFor(() => causes.length === 3);
    expect(causes).toEqual(["interrupt", null, "shutdown"]);
  });

  it("answers /help and explains unknown commands", async () => {
    const runner = makeRunner();
    await runner.receive(msg("/help"));
    await runner.receive(msg("/frobnicate now"));
    await waitFor(() => adapter.texts().length === 2);
    expect(adapter.texts()[0]).toContain("/retry");
    expect(adapter.texts()[1]).toBe(TEXT.unknownCommand("frobnicate"));
  });

  it("interrupts the running turn for a new message in interrupt mode", async () => {
    const runner = makeRunner("interrupt");
    await runner.receive(msg("block please"));
    await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
    await runner.receive(msg("next"));
    await waitFor(() => adapter.texts().includes("echo: next"));
    expect(adapter.texts()).toEqual(["echo: next"]);
  });

  it("queues a late-delivered (backlog) message behind the running turn instead of interrupting it", async () => {
    const runner = makeRunner("interrupt");
    await runner.receive(msg("pause first"));
    await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
    await runner.receive({ ...msg("pause replayed"), backlog: true });
    await waitFor(() => adapter.texts().length === 2);
    expect(adapter.texts()).toEqual(["echo: pause first", "echo: pause replayed"]);
  });

  it("queues a message for a busy session in queue mode and runs it afterwards", async () => {
    const runner = makeRunner("queue");
    await runner.receive(msg("block"));
    await waitFor(() => runner.activeTurns().length === 1);
    await runner.receive(msg("later"));
    await waitFor(() => adapter.texts().includes(TEXT.queued));
    expect(adapter.texts()).not.toContain("echo: later");
    await runner.receive(msg("/stop"));
    await waitFor(() => adapter.texts().includes("echo: later"));
    expect(adapter.texts()).toContain(TEXT.stopped);
  });

  it("hands a message to the running turn in steer mode", async () => {
    const runner = makeRunner("steer");
    const first = await runner.receive(msg("block"));
    await waitFor(() => runner.activeTurns().length === 1);
    await runner.receive(msg("go left"));
    await waitFor(() => adapter.texts().includes("steered"));
    const contents = (await store.loadTranscript(first.sessionId)).map((m) => m.message.content);
    expect(contents).toEqual(["block", "go left", "steered"]);
    expect(await store.listOpenInbox()).toHaveLength(0);
  });

  it("runs sessions in parallel but one turn at a time per session", async () => {
    const runner = makeRunner("queue");
    await runner.receive(msg("block", "a"));
    await runner.receive(msg("hello", "b"));
    await waitFor(() => adapter.texts("b").includes("echo: hello"));
    expect(runner.activeTurns().map((t) => t.sessionKey)).toEqual(["agent:main:test:dm:a"]);
    runner.interruptAll();
    expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
  });

  it("refuses new work while draining, and still runs internal resumes", async () => {
    const runner = makeRunner();
    runner.setDraining(true);
    const accepted = await runner.receive(msg("hi"));
    await waitFor(() => adapter.texts().includes(DRAIN_REFUSAL));
    await store.markResumePending(["agent:main:test:dm:1"], "restart_interrupted");
    const session = await store.getSession("agent:main:test:dm:1");
    runner.resume(session!);
    await waitFor(() => adapter.texts().some((t) => t.startsWith("echo:")));
    expect(seen.at(-1)?.at(-1)?.role).toBe("system");
    expect((await store.listOpenInbox()).find((i) => i.id === accepted.inboxId)).toBeUndefined();
  });

  it("while restarting, refuses idle sessions and keeps queue-mode follow-ups pending for the next start", async () => {
    const runner = makeRunner("queue");
    await runner.receive(msg("block", "busy"));
    await waitFor(() => runner.activeTurns().length === 1);
    runner.setAdmission("restarting");
    await runner.receive(msg("idle one", "idle"));
    const followUp = await runner.receive(msg("follow up", "busy"));
    await waitFor(() => adapter.texts().includes(queuedForAfterRestartText(true)));
    await waitFor(() => adapter.texts().includes(notAcceptingText(true)));
    const open = await store.listOpenInbox();
    expect(open.find((i) => i.id === followUp.inboxId)?.state).toBe("pending");
    runner.interruptAll();
    await runner.waitForIdle(IDLE_WAIT_MS);
  });

  it("starts a fresh transcript on /new", async () => {
    const runner = makeRunner();
    const first = await runner.receive(msg("one"));
    await waitFor(() => adapter.texts().includes("echo: one"));
    await runner.receive(msg("/new"));
    await waitFor(() => adapter.texts().includes(TEXT.newSession));
    const second = await runner.receive(msg("two"));
    expect(second.sessionId).not.toBe(first.sessionId);
    await waitFor(() => adapter.texts().includes("echo: two"));
    expect(seen.at(-1)?.map((m) => m.content)).toEqual(["two"]);
  });

  it("re-runs the last user message on /retry", async () => {
    const runner = makeRunner();
    await runner.receive(msg("again"));
    await waitFor(() => adapter.texts().includes("echo: again"));
    await runner.receive(msg("/retry"));
    await waitFor(() => adapter.texts().filter((t) => t === "echo: again").length === 2);
  });

  it("keeps a reply pending while the platform fails and delivers it once it recovers", async () => {
    adapter.failNext = 2;
    const runner = makeRunner();
    await runner.receive(msg("persist"));
    await waitFor(() => adapter.texts().includes("echo: persist"), { timeoutMs: 5000 });
    expect(adapter.texts().filter((t) => t === "echo: persist")).toHaveLength(1);
  });

  it("keeps a fresh resume-pending session and tells the model it is resuming", async () => {
    const runner = makeRunner();
    const first = await runner.receive(msg("one"));
    await waitFor(() => adapter.texts().includes("echo: one"));
    await store.markResumePending(["agent:main:test:dm:1"], "restart_interrupted");
    await runner.receive(msg("two"));
    await waitFor(() => adapter.texts().includes("echo: two"));
    const session = await store.getSession("agent:main:test:dm:1");
    expect(session?.sessionId).toBe(first.sessionId);
    expect(session?.resumePending).toBe(false);
    const history = seen.at(-1)!;
    expect(history.map((m) => m.role)).toEqual(["user", "assistant", "system", "user"]);
    expect(history.at(-1)?.content).toBe("two");
  });

  it("answers a backlog left by a previous process as one turn that sees every message", async () => {
    await store.acceptInbound(msg("pause first"));
    await store.acceptInbound(msg("pause second"));
    await store.acceptInbound(msg("pause third"));
    const runner = makeRunner("interrupt");
    expect(await runner.dispatchOpenInbox()).toBe(3);
    await waitFor(() => adapter.texts().length === 1);
    await runner.waitForIdle(IDLE_WAIT_MS);
    expect(adapter.texts()).toEqual(["echo: pause third"]);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.filter((m) => m.role === "user").map((m) => m.content)).toEqual([
      "pause first",
      "pause second",
      "pause third",
    ]);
    expect(await store.listOpenInbox()).toEqual([]);
  });

  it("keeps a message of another sender in a shared chat out of the batch", async () => {
    await store.acceptInbound(msg("pause first"));
    await store.acceptInbound({ ...msg("pause other"), senderId: "8" });
    const runner = makeRunner("interrupt");
    await runner.dispatchOpenInbox();
    await waitFor(() => adapter.texts().length === 2);
    expect(adapter.texts()).toEqual(["echo: pause first", "echo: pause other"]);
  });

  describe("lifecycle", () => {
    const key = (chatId = "1") => `agent:main:test:dm:${chatId}`;

    /** Stores a past exchange that was cut off after a tool result the agent never answered. */
    async function seedInterruptedTurn(chatId = "1"): Promise<string> {
      const { item } = await store.acceptInbound(msg("run it", chatId));
      const turn = await store.startTurn({
        sessionKey: key(chatId),
        inboxId: item.id,
        userMessage: { role: "user", content: "run it" },
      });
      await store.appendMessages(turn.sessionId, turn.id, [
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "t1", type: "function", function: { name: "terminal", arguments: "{}" } },
          ],
        },
        { role: "tool", tool_call_id: "t1", content: "done" },
      ]);
      await store.finishTurn({
        turnId: turn.id,
        state: "interrupted",
        finalMessage: null,
        reply: null,
      });
      return turn.sessionId;
    }

    it("refuses /restart and /sethome from a sender without operator rights and asks for nothing", async () => {
      const asked: string[] = [];
      const runner: Runner = makeRunner("interrupt", scriptedAgent(seen, signals), {
        control: {
          requestRestart: async () => {
            asked.push("restart");
            return null;
          },
          setHomeChannel: async () => {
            asked.push("sethome");
          },
        },
      });
      await runner.receive(msg("/restart"));
      await runner.receive(msg("/sethome"));
      await waitFor(
        () => adapter.texts().filter((t) => t.includes("operator rights")).length === 2,
      );
      expect(asked).toEqual([]);
      expect(await store.listOpenInbox()).toEqual([]);
      // The refusal names where operators are configured, email's key included.
      expect(adapter.texts().find((t) => t.includes("operator rights"))).toContain("admin_senders");
    });

    it("/restart while busy answers with the gateway's reply and does not interrupt the running turn", async () => {
      const asked: { address: unknown; messageId: string }[] = [];
      const runner: Runner = makeRunner("interrupt", scriptedAgent(seen, signals), {
        control: {
          requestRestart: async (from) => {
            asked.push(from);
            return drainingBeforeRestartText(runner.activeTurns().length);
          },
          setHomeChannel: async () => {},
        },
      });
      await runner.receive(msg("block"));
      await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
      const restart = { ...msg("/restart"), operator: true };
      await runner.receive(restart);
      await waitFor(() =>
        adapter.texts().includes("⏳ Draining 1 active agent(s) before restart..."),
      );
      expect(asked).toEqual([{ address: restart.address, messageId: restart.platformMessageId }]);
      expect(signals[0]?.aborted).toBe(false);
      expect(runner.activeTurns()).toHaveLength(1);
      runner.interruptAll();
      await runner.waitForIdle(IDLE_WAIT_MS);
    });

    it("in queue mode a follow-up during a restart is queued durably without interrupting, and runs after the restart", async () => {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const echo = scriptedAgent(seen, signals);
      const agent: AgentRun = async (input) => {
        const last = input.history.findLast((m) => m.role === "user");
        if (last?.content !== "hold") return echo(input);
        signals.push(input.signal);
        await input.journal.recordMessages([]);
        await held;
        return {
          stopReason: "stop",
          reply: "first done",
          finalMessage: { role: "assistant", content: "first done" },
          iterations: 1,
        };
      };
      const runner = makeRunner("queue", agent);
      await runner.receive(msg("hold"));
      await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
      runner.setAdmission("restarting");
      const followUp = await runner.receive(msg("follow up"));
      await waitFor(() => adapter.texts().includes(queuedForAfterRestartText(true)));
      expect(adapter.texts()).toContain(
        "⏳ Gateway restarting — queued for the next turn after it comes back.",
      );
      expect(signals[0]?.aborted).toBe(false);
      release();
      await waitFor(() => adapter.texts().includes("first done"));
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      const open = await store.listOpenInbox();
      expect(open.map((i) => [i.id, i.state])).toEqual([[followUp.inboxId, "pending"]]);
      expect(adapter.texts()).not.toContain("echo: follow up");

      const next = makeRunner("queue", agent);
      expect(await next.dispatchOpenInbox()).toBe(1);
      await waitFor(() => adapter.texts().includes("echo: follow up"));
    });

    it("refuses a new session's message while restarting, and says shutting down while stopping", async () => {
      const runner = makeRunner();
      runner.setAdmission("restarting");
      const first = await runner.receive(msg("hello", "fresh"));
      await waitFor(() =>
        adapter
          .texts()
          .includes("⏳ Gateway is restarting and is not accepting new work right now."),
      );
      runner.setAdmission("stopping");
      await runner.receive(msg("hello again", "other"));
      await waitFor(() => adapter.texts("other").includes(notAcceptingText(false)));
      expect(notAcceptingText(false)).toContain("shutting down");
      expect(seen).toHaveLength(0);
      expect((await store.listOpenInbox()).map((i) => i.id)).not.toContain(first.inboxId);
    });

    it("adds the auto-continue note to the model input only: the stored user message has no system note", async () => {
      const sessionId = await seedInterruptedTurn();
      const runner = makeRunner();
      await runner.receive(msg("what now?"));
      await waitFor(() => adapter.texts().includes("echo: what now?"));
      const input = seen.at(-1)!;
      expect(input.slice(-2)).toEqual([
        { role: "system", content: AUTO_CONTINUE_NOTE },
        { role: "user", content: "what now?" },
      ]);
      const stored = (await store.loadTranscript(sessionId)).map((m) => m.message);
      expect(stored.filter((m) => m.role === "system")).toEqual([]);
      expect(stored.at(-2)).toEqual({ role: "user", content: "what now?" });
    });

    it("a suspended session's next message starts fresh with a notice and no auto-continue note", async () => {
      const oldId = await seedInterruptedTurn();
      await store.setSuspended(key(), true);
      const runner = makeRunner();
      const result = await runner.receive(msg("hello again"));
      await waitFor(() => adapter.texts().includes("echo: hello again"));
      expect(adapter.texts()).toEqual([SUSPENDED_NOTICE, "echo: hello again"]);
      expect(seen.at(-1)).toEqual([{ role: "user", content: "hello again" }]);
      const session = await store.getSession(key());
      expect(session?.sessionId).not.toBe(oldId);
      expect(session?.suspended).toBe(false);
      expect(result.accepted).toBe(true);
    });

    it("a stale resume-pending session is reset on its next message; a fresh one continues", async () => {
      const HOUR = 3_600_000;
      const staleId = await seedInterruptedTurn("stale");
      const freshId = await seedInterruptedTurn("fresh");
      await store.markResumePending([key("stale"), key("fresh")], "restart_timeout");
      const later = Date.now() + 2 * HOUR;
      const staleRunner = makeRunner("interrupt", scriptedAgent(seen, signals), {
        autoResumeFreshnessMs: HOUR,
        now: () => later,
      });
      await staleRunner.receive(msg("hi", "stale"));
      await waitFor(() => adapter.texts("stale").includes("echo: hi"));
      expect(adapter.texts("stale")).toEqual([TEXT.stale, "echo: hi"]);
      expect(seen.at(-1)).toEqual([{ role: "user", content: "hi" }]);
      expect((await store.getSession(key("stale")))?.sessionId).not.toBe(staleId);

      const freshRunner = makeRunner("interrupt", scriptedAgent(seen, signals), {
        autoResumeFreshnessMs: HOUR,
      });
      await freshRunner.receive(msg("hi", "fresh"));
      await waitFor(() => adapter.texts("fresh").includes("echo: hi"));
      expect(adapter.texts("fresh")).toEqual(["echo: hi"]);
      const session = await store.getSession(key("fresh"));
      expect(session?.sessionId).toBe(freshId);
      expect(session?.resumePending).toBe(false);
    });

    it("stop leaves unfinished inbox items open for the next start", async () => {
      const runner = makeRunner("queue");
      await runner.receive(msg("block"));
      await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
      const queued = await runner.receive(msg("later"));
      await waitFor(() => adapter.texts().includes(TEXT.queued));
      runner.setAdmission("stopping");
      runner.interruptAll("shutdown");
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      expect((await store.listOpenInbox()).map((i) => i.id)).toEqual([queued.inboxId]);
      expect(adapter.texts()).not.toContain("echo: later");

      const next = makeRunner("queue");
      await next.dispatchOpenInbox();
      await waitFor(() => adapter.texts().includes("echo: later"));
    });

    it("an interrupted turn releases its model call (abort signal fired) and ends as interrupted", async () => {
      const runner = makeRunner();
      const result = await runner.receive(msg("block"));
      await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
      expect(signals[0]?.aborted).toBe(false);
      runner.interruptAll("shutdown");
      expect(signals[0]?.aborted).toBe(true);
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      expect(runner.activeTurns()).toEqual([]);
      expect(await store.listRunningTurns()).toEqual([]);
      const transcript = await store.loadTranscript(result.sessionId);
      expect(transcript.map((m) => m.message.role)).toEqual(["user"]);
    });

    it("a resume turn adds one system note and no user message", async () => {
      const sessionId = await seedInterruptedTurn();
      await store.markResumePending([key()], "restart_timeout");
      const runner = makeRunner();
      runner.resume((await store.getSession(key()))!);
      await waitFor(() => adapter.texts().includes("echo: run it"));
      const input = seen.at(-1)!;
      expect(input.filter((m) => m.role === "system")).toEqual([
        { role: "system", content: resumeNote("restart_timeout") },
      ]);
      expect(input.at(-1)).toEqual({ role: "system", content: resumeNote("restart_timeout") });
      const stored = (await store.loadTranscript(sessionId)).map((m) => m.message);
      expect(stored.filter((m) => m.role === "user")).toEqual([
        { role: "user", content: "run it" },
      ]);
      expect((await store.getSession(key()))?.resumePending).toBe(false);
    });

    it.each(["queue", "steer"] as const)(
      "in %s mode a new message into a resume-pending session runs after its resume, each with its own reply",
      async (mode) => {
        await seedInterruptedTurn();
        await store.markResumePending([key()], "restart_interrupted");
        const runner = makeRunner(mode);
        await runner.receive(msg("two"));
        const replies = () => adapter.texts().filter((t) => t.startsWith("echo:"));
        await waitFor(() => replies().length === 2);
        expect(replies()).toEqual(["echo: run it", "echo: two"]);
        expect(adapter.texts()).toContain(TEXT.queued);
        expect(seen.map((input) => input.at(-1))).toEqual([
          { role: "system", content: resumeNote("restart_interrupted") },
          { role: "user", content: "two" },
        ]);
        expect(seen[1]!.filter((m) => m.role === "system")).toEqual([]);
        expect((await store.getSession(key()))?.resumePending).toBe(false);
      },
    );

    it("/retry in a resume-pending session continues the interrupted request now, without a second copy of it", async () => {
      const sessionId = await seedInterruptedTurn();
      await store.markResumePending([key()], "restart_interrupted");
      const runner = makeRunner("queue");
      await runner.receive(msg("/retry"));
      await waitFor(() => adapter.texts().includes("echo: run it"));
      expect(seen.at(-1)?.at(-1)).toEqual({
        role: "system",
        content: resumeNote("restart_interrupted"),
      });
      const users = (await store.loadTranscript(sessionId)).filter(
        (m) => m.message.role === "user",
      );
      expect(users).toHaveLength(1);
      expect((await store.getSession(key()))?.resumePending).toBe(false);
    });

    it("/retry after a suspension runs the dropped request again on a fresh start", async () => {
      const oldId = await seedInterruptedTurn();
      await store.setSuspended(key(), true);
      const runner = makeRunner();
      await runner.receive(msg("/retry"));
      await waitFor(() => adapter.texts().includes("echo: run it"));
      expect(seen.at(-1)).toEqual([{ role: "user", content: "run it" }]);
      const session = await store.getSession(key());
      expect(session?.sessionId).not.toBe(oldId);
      expect(session?.suspended).toBe(false);
    });

    it("a session already told of its dropped request starts fresh on its next message without a second notice", async () => {
      await seedInterruptedTurn();
      await store.enqueueRequestNotice({
        sessionKey: key(),
        notice: "dropped",
        address: { platform: "test", chatId: "1" },
        text: "dropped: run it",
      });
      await store.setSuspended(key(), true);
      const runner = makeRunner();
      await runner.receive(msg("hello again"));
      await waitFor(() => adapter.texts().includes("echo: hello again"));
      expect(adapter.texts()).toEqual(["dropped: run it", "echo: hello again"]);
      expect(seen.at(-1)).toEqual([{ role: "user", content: "hello again" }]);
    });

    it("a resumed reply answers the interrupted message, not a /restart sent after it", async () => {
      const blocking: AgentRun = async (input) => {
        await input.journal.recordMessages([]);
        await new Promise<void>((resolve) =>
          input.signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        return { stopReason: "aborted", reply: "", finalMessage: null, iterations: 1 };
      };
      const anchored = (text: string) => {
        const m = msg(text);
        return { ...m, address: { ...m.address, replyToMessageId: m.platformMessageId } };
      };
      const first = makeRunner("interrupt", blocking);
      const request = anchored("hold on");
      await first.receive(request);
      await waitFor(() => first.activeTurns().some((t) => t.agentStarted));
      await first.receive({ ...anchored("/restart"), operator: true });
      await waitFor(() => adapter.texts().includes("restarting"));
      first.setAdmission("restarting");
      first.interruptAll("shutdown");
      expect(await first.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      await store.markResumePending([key()], "restart_timeout");

      const next = makeRunner();
      next.resume((await store.getSession(key()))!);
      await waitFor(() => adapter.texts().includes("echo: hold on"));
      const reply = adapter.delivered.find((d) => d.text === "echo: hold on");
      expect(reply?.address.replyToMessageId).toBe(request.platformMessageId);
    });

    it("without a model, a resume and a /retry answer with the no-model text and leave nothing running", async () => {
      await seedInterruptedTurn();
      await store.markResumePending([key()], "restart_interrupted");
      const runner = makeRunner("interrupt", null);
      runner.resume((await store.getSession(key()))!);
      await waitFor(() => adapter.texts().includes(TEXT.noModel));
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      expect(await store.listRunningTurns()).toEqual([]);
      expect((await store.getSession(key()))?.resumePending).toBe(false);

      await runner.receive(msg("/retry"));
      await waitFor(() => adapter.texts().filter((t) => t === TEXT.noModel).length === 2);
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      expect(await store.listRunningTurns()).toEqual([]);
      expect(runner.activeTurns()).toEqual([]);
    });

    it("an interrupted resume turn leaves the session resume-pending", async () => {
      let block = true;
      const echo = scriptedAgent(seen, signals);
      const agent: AgentRun = async (input) => {
        if (!block) return echo(input);
        signals.push(input.signal);
        await input.journal.recordMessages([]);
        await new Promise<void>((resolve) =>
          input.signal.addEventListener("abort", () => resolve(), { once: true }),
        );
        return { stopReason: "aborted", reply: "", finalMessage: null, iterations: 1 };
      };
      await seedInterruptedTurn();
      await store.markResumePending([key()], "restart_interrupted");
      const runner = makeRunner("interrupt", agent);
      runner.resume((await store.getSession(key()))!);
      await waitFor(() => runner.activeTurns().some((t) => t.agentStarted));
      runner.interruptAll("shutdown");
      expect(await runner.waitForIdle(IDLE_WAIT_MS)).toBe(true);
      const session = await store.getSession(key());
      expect(session?.resumePending).toBe(true);
      expect(session?.resumeReason).toBe("restart_interrupted");
      block = false;
      runner.resume(session!);
      await waitFor(() => adapter.texts().includes("echo: run it"));
      await runner.waitForIdle(IDLE_WAIT_MS);
      expect((await store.getSession(key()))?.resumePending).toBe(false);
    });
  });

  it("stores messages arriving while intake is held and dispatches each exactly once when it opens", async () => {
    const runner = makeRunner("queue");
    runner.holdIntake();
    await runner.receive(msg("pause early"));
    await new Promise((r) => setTimeout(r, 100));
    expect(adapter.texts()).toEqual([]);
    const opening = runner.dispatchOpenInbox();
    await runner.receive(msg("pause during"));
    expect(await opening).toBeLessThanOrEqual(2);
    const replies = () => adapter.texts().filter((t) => t.startsWith("echo:"));
    await waitFor(() => replies().length >= 1);
    await runner.waitForIdle(IDLE_WAIT_MS);
    // Both waited for the chat when intake opened: one turn answers them.
    expect(replies()).toEqual(["echo: pause during"]);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.filter((m) => m.content === "pause early")).toHaveLength(1);
  });

  it("starts nothing new once stopping, not even a /retry", async () => {
    const runner = makeRunner();
    await runner.receive(msg("once"));
    await waitFor(() => adapter.texts().includes("echo: once"));
    runner.setAdmission("restarting");
    await runner.receive(msg("/retry"));
    await waitFor(() => adapter.texts().includes(notAcceptingText(true)));
    expect(adapter.texts().filter((t) => t === "echo: once")).toHaveLength(1);
  });
});
