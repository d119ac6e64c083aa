/**
 * Kills the real gateway process at each named crash point (KEEL_CRASH_POINT → SIGKILL) and at
 * a model call in flight, restarts it, and checks the record and the chat: the message is
 * answered, side-effecting tools ran at most once and the model was told their outcome is
 * unknown, read-only tools re-ran, and a queued reply was sent (at most one duplicate when the
 * crash came between "sent" and "marked"). Needs `npm run build` (the CLI runs from dist/).
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { answeredIds } from "../chaos/chaos-model.js";
import { createRig, type Rig } from "../chaos/rig.js";
import { type GatewayProcess, isBuilt } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

const CHAT = 4201;
let rig: Rig | null = null;
let gateway: GatewayProcess | null = null;

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: these tests start bin/keel.js");
});

afterEach(async () => {
  await gateway?.stop();
  gateway = null;
  await rig?.close();
  rig = null;
});

function replies(r: Rig): string[] {
  return r.telegram
    .chatLog(CHAT)
    .filter((e) => e.from === "bot" && e.text.startsWith("re "))
    .map((e) => e.text);
}

async function answered(r: Rig, id: string): Promise<string> {
  return waitFor(() => replies(r).find((text) => answeredIds(text).includes(id)), {
    timeoutMs: 15_000,
    message: `a reply to ${id}`,
  });
}

/** Starts with the crash point, sends `text`, and waits until the point has killed the process. */
async function crashAt(point: string, text: string): Promise<Rig> {
  const r = await createRig({ chats: [CHAT], seed: 7 });
  rig = r;
  gateway = await r.start({ crashPoint: point });
  r.telegram.sendUserMessage({ chatId: CHAT, text });
  const died = await gateway.exitsWithin(15_000);
  expect(died, `the gateway should die at ${point}`).toBe(true);
  expect(gateway.exitStatus?.signal).toBe("SIGKILL");
  return r;
}

async function restart(r: Rig): Promise<void> {
  gateway = await r.start();
}

interface TurnRow {
  id: number;
  inbox_id: number | null;
  state: string;
}

function turns(r: Rig): TurnRow[] {
  return r.readDb(
    (db) => db.prepare("SELECT id, inbox_id, state FROM turns ORDER BY id").all() as TurnRow[],
  );
}

function toolCallsOf(r: Rig): { tool_call_id: string; name: string; state: string }[] {
  return r.readDb(
    (db) =>
      db.prepare("SELECT tool_call_id, name, state FROM tool_calls ORDER BY id").all() as {
        tool_call_id: string;
        name: string;
        state: string;
      }[],
  );
}

/** Stops the gateway cleanly so the record can be read. */
async function settle(): Promise<void> {
  await gateway?.terminate();
  gateway = null;
}

describe("crash before the turn starts", () => {
  it("answers a message committed to the inbox but never started (after_inbox_commit)", async () => {
    const r = await crashAt("after_inbox_commit", "c1.1 plain");
    const inbox = r.readDb(
      (db) => db.prepare("SELECT state FROM inbox").all() as { state: string }[],
    );
    expect(inbox).toEqual([{ state: "pending" }]);
    expect(turns(r)).toEqual([]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(replies(r)).toHaveLength(1);
    expect(turns(r).map((t) => t.state)).toEqual(["done"]);
  });
});

describe("crash while the turn runs", () => {
  it("resumes a turn cut off right after it started (after_turn_start)", async () => {
    const r = await crashAt("after_turn_start", "c1.1 plain");
    expect(turns(r).map((t) => t.state)).toEqual(["running"]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    const all = turns(r);
    expect(all[0]!.state).toBe("interrupted");
    // The continuation is a synthetic turn (no inbox message): the session resumed by itself.
    expect(all.slice(1)).toEqual([expect.objectContaining({ inbox_id: null, state: "done" })]);
    expect(replies(r)).toHaveLength(1);
  });

  it("resumes a turn whose model call was in flight", async () => {
    const r = await createRig({ chats: [CHAT], seed: 7, maxSlowMs: 5_000 });
    rig = r;
    gateway = await r.start();
    r.telegram.sendUserMessage({ chatId: CHAT, text: "c1.1 slow" });
    await waitFor(() => r.model.requests.length === 1, { message: "the model call" });
    await gateway.stop();
    expect(turns(r).map((t) => t.state)).toEqual(["running"]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(r.model.requests.length).toBe(2);
    expect(replies(r)).toHaveLength(1);
  });

  it("runs a tool call the model asked for but that never started (after_model_call)", async () => {
    const r = await crashAt("after_model_call", "c1.1 tool");
    expect(toolCallsOf(r)).toEqual([]);
    expect(r.ledgerLines()).toEqual([]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    const [call] = [...r.chaos.toolCalls.keys()];
    expect(r.ledgerLines()).toEqual([call]);
    expect(r.chaos.unknownOutcomeSeen.size).toBe(0);
  });
});

describe("crash during recovery", () => {
  it("resumes a session whose recovery was itself cut off (mid_recovery)", async () => {
    const r = await crashAt("after_turn_start", "c1.1 plain");
    gateway = await r.spawn({ crashPoint: "mid_recovery" });
    expect(await gateway.exitsWithin(15_000)).toBe(true);
    expect(turns(r).map((t) => t.state)).toEqual(["running"]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(turns(r).map((t) => t.state)).toEqual(["interrupted", "done"]);
    expect(replies(r)).toHaveLength(1);
  });
});

describe("crash around a tool call", () => {
  it("never re-runs a side-effecting tool that started but did not run (after_tool_started)", async () => {
    const r = await crashAt("after_tool_started", "c1.1 tool");
    const [call] = [...r.chaos.toolCalls.keys()];
    expect(toolCallsOf(r)).toEqual([{ tool_call_id: call, name: "terminal", state: "started" }]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(r.ledgerLines()).toEqual([]);
    expect([...r.chaos.unknownOutcomeSeen]).toEqual([call]);
    expect(toolCallsOf(r)).toEqual([{ tool_call_id: call, name: "terminal", state: "finished" }]);
  });

  it("never re-runs a side-effecting tool that ran but whose result was not stored (after_tool_ran)", async () => {
    const r = await crashAt("after_tool_ran", "c1.1 tool");
    const [call] = [...r.chaos.toolCalls.keys()];
    expect(r.ledgerLines()).toEqual([call]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(r.ledgerLines()).toEqual([call]);
    expect([...r.chaos.unknownOutcomeSeen]).toEqual([call]);
  });

  it("keeps a stored tool result and continues from it (after_tool_finished)", async () => {
    const r = await crashAt("after_tool_finished", "c1.1 tool");
    const [call] = [...r.chaos.toolCalls.keys()];
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(r.ledgerLines()).toEqual([call]);
    expect(r.chaos.unknownOutcomeSeen.size).toBe(0);
    expect(r.chaos.toolCalls.size).toBe(1);
  });

  it.each(["after_tool_started", "after_tool_ran"])(
    "re-runs a read-only tool cut off by a crash (%s)",
    async (point) => {
      const r = await crashAt(point, "c1.1 read");
      const [call] = [...r.chaos.toolCalls.keys()];
      expect(r.chaos.readResultSeen.size).toBe(0);
      await restart(r);
      await answered(r, "c1.1");
      await settle();
      expect(r.chaos.unknownOutcomeSeen.size).toBe(0);
      expect([...r.chaos.readResultSeen]).toEqual([call]);
    },
  );
});

describe("crash around the reply", () => {
  it("sends a reply queued but not sent, once (after_reply_queued)", async () => {
    const r = await crashAt("after_reply_queued", "c1.1 plain");
    expect(replies(r)).toEqual([]);
    await restart(r);
    await answered(r, "c1.1");
    await settle();
    expect(replies(r)).toHaveLength(1);
    expect(turns(r).map((t) => t.state)).toEqual(["done"]);
  });

  it("sends a reply sent but not marked once more: the one documented duplicate (after_reply_sent)", async () => {
    const r = await crashAt("after_reply_sent", "c1.1 plain");
    const [first] = replies(r);
    expect(first).toBeDefined();
    await restart(r);
    await waitFor(() => replies(r).length === 2, { timeoutMs: 15_000, message: "the resend" });
    await settle();
    expect(replies(r)).toEqual([first, first]);
    const outbox = r.readDb((db) => db.prepare("SELECT state FROM outbox").all());
    expect(outbox).toEqual([{ state: "delivered" }]);
  });
});
