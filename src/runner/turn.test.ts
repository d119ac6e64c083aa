import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import type { ChatMessage, ToolCall } from "../agent/types.js";
import type { ChatAddress, InboundMessage } from "../contract/platform.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import type { AgentRun } from "./agent-run.js";
import { EventFanout } from "./events.js";
import { resumeNote } from "./history.js";
import { type ActiveTurn, createActiveTurn } from "./lane.js";
import { UNKNOWN_OUTCOME } from "./texts.js";
import { runJournaledTurn } from "./turn.js";

const KEY = "agent:main:telegram:dm:1";
const ADDRESS: ChatAddress = { platform: "telegram", chatId: "1" };
const NOTE: ChatMessage = { role: "system", content: resumeNote(null) };

function call(id: string, name: string): ToolCall {
  return { id, type: "function", function: { name, arguments: "{}" } };
}

describe("runJournaledTurn after a crash (resume)", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let histories: ChatMessage[][];

  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
    histories = [];
  });

  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  const agent: AgentRun = async (input) => {
    histories.push(input.history);
    return {
      stopReason: "stop",
      reply: "done",
      finalMessage: { role: "assistant", content: "done" },
      iterations: 1,
    };
  };

  /** A turn cut off after the model asked for `calls`; `started` were journaled as started. */
  async function cutOffTurn(calls: ToolCall[], started: ToolCall[]): Promise<string> {
    const session = await store.ensureSession(KEY, ADDRESS);
    const turn = await store.startTurn({
      sessionKey: KEY,
      inboxId: null,
      userMessage: { role: "user", content: "do it" },
    });
    await store.appendMessages(session.sessionId, turn.id, [
      { role: "assistant", content: null, tool_calls: calls },
    ]);
    for (const c of started) {
      await store.recordToolStart({
        toolCallId: c.id,
        turnId: turn.id,
        sessionId: session.sessionId,
        name: c.function.name,
        arguments: c.function.arguments,
      });
    }
    await store.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
    });
    return session.sessionId;
  }

  async function resume(): Promise<ChatMessage[]> {
    const session = (await store.getSession(KEY))!;
    await run(activeTurn({ kind: "resume", session }, session.sessionId), agent);
    return histories.at(-1)!;
  }

  function activeTurn(work: ActiveTurn["work"], sessionId: string): ActiveTurn {
    return { ...createActiveTurn(KEY, work, 0), sessionId, address: ADDRESS };
  }

  async function run(active: ActiveTurn, turnAgent: AgentRun): Promise<void> {
    await runJournaledTurn(
      {
        store,
        agent: turnAgent,
        isReadOnlyTool: (name) => name === "read_file",
        events: new EventFanout(),
        logger: pino({ level: "silent" }),
        crashPoint: () => {},
        onReplyQueued: () => {},
      },
      active,
    );
  }

  it("ends with the resume note when nothing is left to run", async () => {
    await store.ensureSession(KEY, ADDRESS);
    await store.startTurn({
      sessionKey: KEY,
      inboxId: null,
      userMessage: { role: "user", content: "hi" },
    });
    expect(await resume()).toEqual([{ role: "user", content: "hi" }, NOTE]);
  });

  it("keeps tool calls that never started last, so the agent runs them", async () => {
    const asked = call("c1", "terminal");
    await cutOffTurn([asked], []);
    const history = await resume();
    expect(history).toEqual([
      { role: "user", content: "do it" },
      NOTE,
      { role: "assistant", content: null, tool_calls: [asked] },
    ]);
  });

  it("records 'outcome unknown' for a side-effecting call cut off while it ran, never re-running it", async () => {
    const terminal = call("c1", "terminal");
    const sessionId = await cutOffTurn([terminal], [terminal]);
    const history = await resume();
    expect(history.at(-2)).toEqual({ role: "tool", tool_call_id: "c1", content: UNKNOWN_OUTCOME });
    expect(history.at(-1)).toEqual(NOTE);
    expect((await store.loadTurnHistory(sessionId)).unfinished).toEqual([]);
  });

  it("leaves a cut-off read-only call to be re-run, next to a side-effecting one marked unknown", async () => {
    const terminal = call("c1", "terminal");
    const read = call("c2", "read_file");
    await cutOffTurn([terminal, read], [terminal, read]);
    const history = await resume();
    expect(history.slice(1)).toEqual([
      NOTE,
      { role: "assistant", content: null, tool_calls: [terminal, read] },
      { role: "tool", tool_call_id: "c1", content: UNKNOWN_OUTCOME },
    ]);
  });

  it("closes a steered message's inbox row as soon as the journal records it", async () => {
    const inbound = (id: string, text: string): InboundMessage => ({
      platform: "telegram",
      chatId: "1",
      platformMessageId: id,
      sessionKey: KEY,
      text,
      address: ADDRESS,
    });
    const { item } = await store.acceptInbound(inbound("1", "first"));
    const { item: steered } = await store.acceptInbound(inbound("2", "also this"));
    const active = activeTurn({ kind: "message", item }, item.sessionId);
    active.steer.push(steered);
    let openWhileRunning: number[] = [];
    await run(active, async (input) => {
      const texts = input.takeSteeredInput();
      await input.journal.recordMessages(texts.map((content) => ({ role: "user", content })));
      // A crash from here on must not hand the steered message to a second turn.
      openWhileRunning = (await store.listOpenInbox()).map((i) => i.id);
      return {
        stopReason: "stop",
        reply: "ok",
        finalMessage: { role: "assistant", content: "ok" },
        iterations: 1,
      };
    });
    expect(openWhileRunning).toEqual([item.id]);
    expect(await store.listOpenInbox()).toEqual([]);
  });
});
