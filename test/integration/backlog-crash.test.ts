/**
 * A backlog taken as one turn survives a crash as a whole: killed at a crash point with three
 * messages waiting for one chat, the next start answers all of them once, in one reply. Needs
 * `npm run build` (the gateway runs from dist/).
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { answeredIds } from "../chaos/chaos-model.js";
import { createRig, type Rig } from "../chaos/rig.js";
import { type GatewayProcess, isBuilt } from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

const CHAT = 4301;
const IDS = ["c1.1", "c1.2", "c1.3"];
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

interface Row {
  id: number;
  state: string;
}

function inbox(r: Rig): Row[] {
  return r.readDb((db) => db.prepare("SELECT id, state FROM inbox ORDER BY id").all() as Row[]);
}

/** The turn that took each inbox row as part of a batch. */
function takenBy(r: Rig): (number | null)[] {
  return r.readDb((db) =>
    (db.prepare("SELECT turn_id FROM inbox ORDER BY id").all() as { turn_id: number | null }[]).map(
      (row) => row.turn_id,
    ),
  );
}

function turns(r: Rig): (Row & { inbox_id: number | null })[] {
  return r.readDb(
    (db) =>
      db.prepare("SELECT id, inbox_id, state FROM turns ORDER BY id").all() as (Row & {
        inbox_id: number | null;
      })[],
  );
}

/** Three messages waiting before the gateway starts with `point`; resolves once it died there. */
async function crashWithBacklog(point: string): Promise<Rig> {
  const r = await createRig({ chats: [CHAT], seed: 11 });
  rig = r;
  for (const id of IDS) r.telegram.sendUserMessage({ chatId: CHAT, text: `${id} plain` });
  gateway = await r.spawn({ crashPoint: point });
  const died = await gateway.exitsWithin(20_000);
  expect(died, `the gateway should die at ${point}`).toBe(true);
  expect(gateway.exitStatus?.signal).toBe("SIGKILL");
  gateway = null;
  return r;
}

/** Restarts, waits for the reply to the whole backlog, and stops cleanly. */
async function answerAfterRestart(r: Rig): Promise<void> {
  gateway = await r.start();
  await waitFor(() => replies(r).find((text) => answeredIds(text).length > 0), {
    timeoutMs: 20_000,
    message: "a reply to the backlog",
  });
  await gateway.terminate();
  gateway = null;
}

describe("a backlog taken as one turn, cut off by a crash", () => {
  it("resumes the batch once when killed right after its turn started (after_turn_start)", async () => {
    const r = await crashWithBacklog("after_turn_start");
    const [turn, ...more] = turns(r);
    expect(more).toEqual([]);
    expect(turn!.state).toBe("running");
    // Every message of the batch was taken by that one turn, none closed before it ends.
    expect(inbox(r).map((row) => row.state)).toEqual(IDS.map(() => "running"));
    await answerAfterRestart(r);
    expect(takenBy(r)).toEqual(IDS.map(() => turn!.id));
    expect(replies(r)).toHaveLength(1);
    expect(answeredIds(replies(r)[0]!)).toEqual(IDS);
    expect(inbox(r).every((row) => row.state === "done")).toBe(true);
    // The cut-off turn, then its resume (no new inbox message): nothing answered twice.
    expect(turns(r).map((t) => [t.inbox_id === null, t.state])).toEqual([
      [false, "interrupted"],
      [true, "done"],
    ]);
  });

  it("runs the stored backlog as one turn when killed before any turn started (after_inbox_commit)", async () => {
    const r = await crashWithBacklog("after_inbox_commit");
    expect(turns(r)).toEqual([]);
    // The batch of updates was committed together: the backlog waits in the inbox.
    expect(inbox(r).map((row) => row.state)).toEqual(IDS.map(() => "pending"));
    await answerAfterRestart(r);
    expect(replies(r)).toHaveLength(1);
    expect(answeredIds(replies(r)[0]!)).toEqual(IDS);
    expect(turns(r).map((t) => t.state)).toEqual(["done"]);
    expect(inbox(r).map((row) => row.state)).toEqual(IDS.map(() => "done"));
  });
});
