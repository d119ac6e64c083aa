/**
 * The store contract for the work several gateways hand to each other, on every implementation
 * (see store.test.ts): a dead gateway's pending inbox items are adopted by one survivor, an inbox
 * item starts one turn ever, and a chat's delivery is marked only under its delivery lease.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { InboundMessage } from "../contract/platform.js";
import { InboxItemTakenError, LeaseLostError, type Store } from "./store.js";

/**
 * How old a heartbeat may be before its gateway counts as dead here: long enough that B's and C's
 * fresh heartbeats stay fresh on a loaded machine, short enough to wait out A's.
 */
const STALE_MS = 400;

function message(id: string, chatId = "42"): InboundMessage {
  return {
    platform: "telegram",
    chatId,
    platformMessageId: id,
    sessionKey: `agent:main:telegram:dm:${chatId}`,
    text: `message ${id}`,
    address: { platform: "telegram", chatId },
  };
}

describe.each(storeHarnesses())("the $name store: work handed between gateways", (harness) => {
  let clock = 1_000_000;
  let a: Store;
  let b: Store;
  let c: Store;

  beforeEach(async () => {
    clock = 1_000_000;
    await harness.setup();
    a = await harness.open(() => clock, { instanceId: "A" });
    b = await harness.open(() => clock, { instanceId: "B" });
    c = await harness.open(() => clock, { instanceId: "C" });
  });
  afterEach(async () => {
    await Promise.all([a.close(), b.close(), c.close()]);
    await harness.teardown();
  });

  /** Lets A's heartbeat grow older than `staleMs` (the injected clock on SQLite, real time on Postgres). */
  async function age(ms: number): Promise<void> {
    clock += ms;
    await new Promise((resolve) => setTimeout(resolve, ms));
  }

  it("a dead gateway's pending items go to one survivor, oldest first; a live one's stay", async () => {
    for (const id of ["A", "B", "C"]) {
      await a.registerInstance({ id, host: "h", pid: 1, startedAt: 1 });
    }
    const first = await a.acceptInbound(message("1"));
    const second = await a.acceptInbound(message("2", "43"));
    const started = await a.acceptInbound(message("3", "44"));
    await a.startTurn({
      sessionKey: started.item.sessionKey,
      inboxId: started.item.id,
      userMessage: null,
    });
    const bOwn = await b.acceptInbound(message("4", "45"));

    // Everyone is alive: nothing is anybody else's to take.
    expect(await c.adoptPendingInbox("C", 60_000)).toEqual([]);

    // A stops heartbeating; B and C keep theirs.
    await age(STALE_MS + 100);
    await b.heartbeatInstance("B");
    await c.heartbeatInstance("C");
    const [byB, byC] = await Promise.all([
      b.adoptPendingInbox("B", STALE_MS),
      c.adoptPendingInbox("C", STALE_MS),
    ]);
    const adopted = [...byB, ...byC];
    // Each pending item of A's went to exactly one of them, in inbox order; the running one
    // (a turn took it) and B's own item are not adoptable.
    expect(adopted.map((i) => i.id).sort((x, y) => x - y)).toEqual([first.item.id, second.item.id]);
    const winner = byB.length > 0 ? byB : byC;
    expect(winner.map((i) => i.id)).toEqual([first.item.id, second.item.id]);
    expect(winner[0]).toMatchObject({ text: "message 1", state: "pending" });
    // Once adopted, they belong to a live gateway: nobody takes them again.
    await b.heartbeatInstance("B");
    await c.heartbeatInstance("C");
    expect(await b.adoptPendingInbox("B", STALE_MS)).toEqual([]);
    expect(await c.adoptPendingInbox("C", STALE_MS)).toEqual([]);
    expect((await b.listOpenInbox()).map((i) => i.id)).toContain(bOwn.item.id);
  });

  it("a gateway whose row is gone (removed) leaves its items to the others at once", async () => {
    await a.registerInstance({ id: "A", host: "h", pid: 1, startedAt: 1 });
    const { item } = await a.acceptInbound(message("1"));
    await a.removeInstance("A");
    expect((await b.adoptPendingInbox("B", 60_000)).map((i) => i.id)).toEqual([item.id]);
  });

  it("at start-up a gateway also takes its own and unstamped items, never a live one's", async () => {
    await b.registerInstance({ id: "B", host: "h", pid: 1, startedAt: 1 });
    const own = await a.acceptInbound(message("1"));
    const unstamped = await harness.open(() => clock);
    const none = await unstamped.acceptInbound(message("2", "43"));
    await unstamped.close();
    const live = await b.acceptInbound(message("3", "44"));
    // A restarted under the same id: its row was re-registered, its items are its own.
    await a.registerInstance({ id: "A", host: "h", pid: 2, startedAt: 2 });
    expect(await a.adoptPendingInbox("A", 60_000)).toEqual([]);
    const atStart = await a.adoptPendingInbox("A", 60_000, { includeOwn: true });
    expect(atStart.map((i) => i.id)).toEqual([own.item.id, none.item.id]);
    expect(atStart.map((i) => i.id)).not.toContain(live.item.id);
  });

  it("an inbox item starts one turn, ever: a second start is refused and stores nothing", async () => {
    const { item } = await a.acceptInbound(message("1"));
    const turn = await a.startTurn({
      sessionKey: item.sessionKey,
      inboxId: item.id,
      userMessage: { role: "user", content: "message 1" },
    });
    await expect(
      b.startTurn({
        sessionKey: item.sessionKey,
        inboxId: item.id,
        userMessage: { role: "user", content: "message 1" },
      }),
    ).rejects.toBeInstanceOf(InboxItemTakenError);
    expect((await b.listRunningTurns()).map((t) => t.id)).toEqual([turn.id]);
    expect(await b.loadTranscript(turn.sessionId)).toHaveLength(1);
    // Finished, it stays taken.
    await a.finishTurn({ turnId: turn.id, state: "done", finalMessage: null, reply: null });
    await expect(
      b.startTurn({ sessionKey: item.sessionKey, inboxId: item.id, userMessage: null }),
    ).rejects.toBeInstanceOf(InboxItemTakenError);
  });

  it("marks a row delivered only while the chat's delivery lease is held", async () => {
    const { item } = await a.acceptInbound(message("1"));
    const row = await a.enqueueOutbox({
      sessionKey: item.sessionKey,
      sessionId: item.sessionId,
      address: { platform: "telegram", chatId: "42" },
      text: "hello",
      kind: "notice",
    });
    const key = "outbox:telegram:42:";
    const mine = (await a.claimSessionLease(key, "A", 1))!;
    // A's lease runs out while it sends; B takes the chat over.
    let theirs = null;
    for (let i = 0; i < 200 && !theirs; i++) {
      await age(5);
      theirs = await b.claimSessionLease(key, "B", 60_000);
    }
    expect(theirs).not.toBeNull();
    await expect(a.markDelivered(row.id, mine)).rejects.toBeInstanceOf(LeaseLostError);
    expect((await b.listPendingOutbox()).map((o) => o.id)).toEqual([row.id]);
    await b.markDelivered(row.id, theirs!);
    expect(await b.listPendingOutbox()).toEqual([]);
  });

  it("outbox rows name the gateway that queued them; live gateways are those that heartbeat", async () => {
    await a.registerInstance({ id: "A", host: "h", pid: 1, startedAt: 1 });
    await b.registerInstance({ id: "B", host: "h", pid: 2, startedAt: 1 });
    const { item } = await a.acceptInbound(message("1"));
    const row = await a.enqueueOutbox({
      sessionKey: item.sessionKey,
      sessionId: item.sessionId,
      address: item.address,
      text: "from A",
      kind: "notice",
    });
    expect(row.queuedBy).toBe("A");
    expect((await b.listPendingOutbox()).map((o) => o.queuedBy)).toEqual(["A"]);
    const unstamped = await harness.open(() => clock);
    const other = await unstamped.enqueueOutbox({
      sessionKey: item.sessionKey,
      sessionId: item.sessionId,
      address: item.address,
      text: "from a command",
      kind: "notice",
    });
    await unstamped.close();
    expect(other.queuedBy).toBeUndefined();

    expect(await c.listLiveInstances(60_000)).toEqual(["A", "B"]);
    await age(STALE_MS + 100);
    await b.heartbeatInstance("B");
    expect(await c.listLiveInstances(STALE_MS)).toEqual(["B"]);
  });
});
