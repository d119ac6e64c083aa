import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RecordingAdapter } from "../../test/helpers/recording-adapter.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { ChatMessage, TurnResult } from "../agent/types.js";
import type { InboundMessage } from "../platforms/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { AgentRun, AgentRunInput } from "./agent-run.js";
import {
  DRAIN_REFUSAL,
  notAcceptingText,
  queuedForAfterRestartText,
  SUSPENDED_NOTICE,
} from "./lifecycle-texts.js";
import { OutboxDispatcher } from "./outbox-dispatcher.js";
import { type BusyInputMode, Runner } from "./runner.js";
import { TEXT } from "./texts.js";

/** A scripted agent: replies "echo: <last user text>", or waits for abort when the text says "block". */
function scriptedAgent(seen: ChatMessage[][]): AgentRun {
  return async (input: AgentRunInput): Promise<TurnResult> => {
    seen.push(input.history);
    const last = [...input.history].reverse().find((m) => m.role === "user");
    const text = last?.content ?? "";
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
      if (input.signal.aborted) return { stopReason: "aborted", reply: "", finalMessage: null, iterations: 1 };
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
  let nextId: number;
  let runnerClock: number;

  function makeRunner(
    mode: BusyInputMode = "interrupt",
    agent: AgentRun | null = scriptedAgent(seen),
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

  it("ignores a redelivered message", async () => {
    const runner = makeRunner();
    const m = msg("once");
    await runner.receive(m);
    expect((await runner.receive(m)).accepted).toBe(false);
    await waitFor(() => adapter.texts().includes("echo: once"));
    await runner.waitForIdle(1000);
    expect(adapter.texts().filter((t) => t === "echo: once")).toHaveLength(1);
  });

  it("answers without a model configured with how to configure one", async () => {
    const runner = makeRunner("interrupt", null);
    await runner.receive(msg("hello"));
    await waitFor(() => adapter.texts().includes(TEXT.noModel));
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
    expect(await runner.waitForIdle(2000)).toBe(true);
  });

  it("refuses new work while draining, and still runs internal resumes", async () => {
    const runner = makeRunner();
    runner.setDraining(true);
    const accepted = await runner.receive(msg("hi"));
    await waitFor(() => adapter.texts().includes(DRAIN_REFUSAL));
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
    await runner.waitForIdle(2000);
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

  it("starts a suspended session fresh on its next message, with a notice", async () => {
    const runner = makeRunner();
    const first = await runner.receive(msg("one"));
    await waitFor(() => adapter.texts().includes("echo: one"));
    await store.setSuspended("agent:main:test:dm:1", true);
    const second = await runner.receive(msg("two"));
    await waitFor(() => adapter.texts().includes("echo: two"));
    expect(adapter.texts()).toContain(SUSPENDED_NOTICE);
    const session = await store.getSession("agent:main:test:dm:1");
    expect(session?.sessionId).not.toBe(first.sessionId);
    expect(session?.suspended).toBe(false);
    expect(seen.at(-1)?.map((m) => m.content)).toEqual(["two"]);
    expect(second.accepted).toBe(true);
  });

  it("resets a session whose interruption is older than the freshness window", async () => {
    const runner = makeRunner();
    const first = await runner.receive(msg("one"));
    await waitFor(() => adapter.texts().includes("echo: one"));
    await store.markResumePending(["agent:main:test:dm:1"], "restart_interrupted");
    runnerClock += 2 * 3_600_000;
    await runner.receive(msg("two"));
    await waitFor(() => adapter.texts().includes("echo: two"));
    expect(adapter.texts(), JSON.stringify(adapter.texts())).toContain(TEXT.stale);
    expect((await store.getSession("agent:main:test:dm:1"))?.sessionId).not.toBe(first.sessionId);
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

  it("answers a backlog left by a previous process in order, without one message interrupting another", async () => {
    await store.acceptInbound(msg("pause first"));
    await store.acceptInbound(msg("pause second"));
    await store.acceptInbound(msg("pause third"));
    const runner = makeRunner("interrupt");
    expect(await runner.dispatchOpenInbox()).toBe(3);
    await waitFor(() => adapter.texts().length === 3);
    expect(adapter.texts()).toEqual(["echo: pause first", "echo: pause second", "echo: pause third"]);
  });
});
