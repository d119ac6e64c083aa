/**
 * The store contract for several gateways on one store, on every implementation (see
 * store.test.ts): the instance registry, per-session leases and the fence every write of a turn
 * checks. Two instances are two stores opened on the same database.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import { LeaseLostError, type SessionLease, type Store } from "./store.js";

const KEY = "agent:main:telegram:dm:42";

describe.each(storeHarnesses())("the $name store: instances and leases", (harness) => {
  let clock = 1_000_000;
  let a: Store;
  let b: Store;

  beforeEach(async () => {
    clock = 1_000_000;
    await harness.setup();
    a = await harness.open(() => clock);
    b = await harness.open(() => clock);
  });
  afterEach(async () => {
    await Promise.all([a.close(), b.close()]);
    await harness.teardown();
  });

  /**
   * B claims until A's short lease has run out (bounded; on Postgres the database's clock moves
   * by itself, on SQLite the injected clock is moved on).
   */
  async function claimAfterExpiry(store: Store, owner: string): Promise<SessionLease> {
    for (let i = 0; i < 200; i++) {
      clock += 1000;
      const lease = await store.claimSessionLease(KEY, owner, 60_000);
      if (lease) return lease;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error("the lease never became free");
  }

  /**
   * Waits until `id` has been silent for `ms` on the store's clock (on SQLite the injected clock
   * is moved on; on Postgres the database's clock only moves by itself, so the heartbeat is set
   * back instead, through a raw write beside the interface).
   */
  async function waitForSilence(store: Store, id: string, ms: number) {
    clock += ms;
    if (harness.name === "postgres") {
      await harness.rows(
        `UPDATE instances SET heartbeat_at = heartbeat_at - ${ms} WHERE id = '${id}'`,
      );
    }
    const found = (await store.listInstances()).find((i) => i.id === id)!;
    expect(found.heartbeatAgeMs).toBeGreaterThanOrEqual(ms);
    return found;
  }

  it("registers instances, refreshes their heartbeat and removes them", async () => {
    await a.registerInstance({ id: "A", host: "h1", pid: 11, startedAt: 1 });
    await b.registerInstance({ id: "B", host: "h2", pid: 22, startedAt: 2 });
    const listed = await a.listInstances();
    expect(listed.map((i) => [i.id, i.host, i.pid, i.startedAt])).toEqual([
      ["A", "h1", 11, 1],
      ["B", "h2", 22, 2],
    ]);
    const before = listed[0]!.heartbeatAt;
    clock += 5000;
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await a.heartbeatInstance("A")).toBe(true);
    expect((await b.listInstances())[0]!.heartbeatAt).toBeGreaterThan(before);
    await a.removeInstance("A");
    expect((await b.listInstances()).map((i) => i.id)).toEqual(["B"]);
    expect(await a.heartbeatInstance("A")).toBe(false);
  });

  it("tells how long each instance has been silent, on the store's clock", async () => {
    await a.registerInstance({ id: "A", host: "h1", pid: 11, startedAt: 1 });
    expect((await b.listInstances())[0]!.heartbeatAgeMs).toBeLessThan(60_000);
    // A falls silent for a minute: its age says so; its next heartbeat resets it.
    await waitForSilence(b, "A", 60_000);
    expect(await a.heartbeatInstance("A")).toBe(true);
    expect((await b.listInstances())[0]!.heartbeatAgeMs).toBeLessThan(60_000);
  });

  it("forgets a silent instance once nobody runs a turn under its lease any more", async () => {
    await a.registerInstance({ id: "A", host: "h1", pid: 11, startedAt: 1 });
    await b.registerInstance({ id: "B", host: "h2", pid: 22, startedAt: 2 });
    // A dies in the middle of a turn, under its lease.
    const { item } = await a.acceptInbound({
      platform: "telegram",
      chatId: "42",
      platformMessageId: "1",
      sessionKey: KEY,
      text: "hi",
      address: { platform: "telegram", chatId: "42" },
    });
    const leaseA = (await a.claimSessionLease(KEY, "A", 1))!;
    const turn = await a.startTurn({
      sessionKey: KEY,
      inboxId: item.id,
      userMessage: { role: "user", content: "hi" },
      lease: leaseA,
    });
    // Not silent for long enough yet: nothing goes.
    expect(await b.removeDeadInstances(3_600_000)).toEqual([]);
    await waitForSilence(b, "A", 60_000);
    await b.heartbeatInstance("B");
    // Silent for long enough, but its cut-off turn still waits for a taker: the row stays.
    expect(await b.removeDeadInstances(60_000)).toEqual([]);
    expect((await b.listInstances()).map((i) => i.id)).toEqual(["A", "B"]);

    // B takes the turn over (as recovery does: under its own lease, the turn closed).
    const leaseB = await claimAfterExpiry(b, "B");
    await b.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
      lease: leaseB,
    });
    await b.heartbeatInstance("B");
    const removed = await b.removeDeadInstances(60_000);
    expect(removed.map((i) => [i.id, i.host, i.pid])).toEqual([["A", "h1", 11]]);
    expect(removed[0]!.heartbeatAgeMs).toBeGreaterThanOrEqual(60_000);
    // B heartbeats: alive, it stays; its lease is untouched.
    expect((await b.listInstances()).map((i) => i.id)).toEqual(["B"]);
    expect(await b.renewSessionLease(leaseB, 60_000)).not.toBeNull();
    // A forgotten instance that comes back finds its row gone, and registers again.
    expect(await a.heartbeatInstance("A")).toBe(false);
  });

  it("a turn started under the session's lease closes the turn its dead predecessor left running", async () => {
    const { item } = await a.acceptInbound({
      platform: "telegram",
      chatId: "42",
      platformMessageId: "1",
      sessionKey: KEY,
      text: "run it",
      address: { platform: "telegram", chatId: "42" },
    });
    // A dies in the middle of its turn; B takes the session once A's lease has run out and
    // starts a turn (a new message, or a resume) that continues from the record.
    const leaseA = (await a.claimSessionLease(KEY, "A", 1))!;
    const cut = await a.startTurn({
      sessionKey: KEY,
      inboxId: item.id,
      userMessage: { role: "user", content: "run it" },
      lease: leaseA,
    });
    const leaseB = await claimAfterExpiry(b, "B");
    const next = await b.startTurn({
      sessionKey: KEY,
      inboxId: null,
      userMessage: null,
      lease: leaseB,
    });
    // Only B's turn runs: a later takeover finds nothing of A's to recover, so it never marks
    // the session for a resume of what B's turn answers.
    expect((await b.listRunningTurns()).map((t) => t.id)).toEqual([next.id]);
    const [row] = await harness.rows(`SELECT state FROM turns WHERE id = ${cut.id}`);
    expect(row?.state).toBe("interrupted");
    expect(await b.listOpenInbox()).toEqual([]);
  });

  it("gives a session to one owner at a time; a released lease is taken with a higher fence", async () => {
    const mine = await a.claimSessionLease(KEY, "A", 60_000);
    expect(mine).toMatchObject({ sessionKey: KEY, owner: "A" });
    expect(await b.claimSessionLease(KEY, "B", 60_000)).toBeNull();
    // Renewing (or claiming again) keeps the fence.
    const renewed = await a.renewSessionLease(mine!, 60_000);
    expect(renewed?.fence).toBe(mine!.fence);
    expect((await a.claimSessionLease(KEY, "A", 60_000))?.fence).toBe(mine!.fence);
    await a.releaseSessionLease(mine!);
    const theirs = await b.claimSessionLease(KEY, "B", 60_000);
    expect(theirs?.owner).toBe("B");
    expect(theirs!.fence).toBeGreaterThan(mine!.fence);
    expect(await a.renewSessionLease(mine!, 60_000)).toBeNull();
    expect(await a.listSessionLeases()).toEqual([theirs]);
  });

  it("a removed (stopped) instance's leases are free at once", async () => {
    await a.registerInstance({ id: "A", host: "h1", pid: 11, startedAt: 1 });
    const mine = await a.claimSessionLease(KEY, "A", 60_000);
    await a.removeInstance("A");
    const theirs = await b.claimSessionLease(KEY, "B", 60_000);
    expect(theirs!.fence).toBeGreaterThan(mine!.fence);
  });

  it("a lease let go is not renewed, even before another owner claims it", async () => {
    await a.registerInstance({ id: "A", host: "h1", pid: 11, startedAt: 1 });
    const freed = await a.claimSessionLease(KEY, "A", 60_000);
    await b.removeInstance("A");
    // The old holder's renewal, landing between the removal and the next claim, fails.
    expect(await a.renewSessionLease(freed!, 60_000)).toBeNull();
    expect((await b.claimSessionLease(KEY, "B", 60_000))?.owner).toBe("B");
    const other = await a.claimSessionLease("agent:main:other", "A", 60_000);
    await a.releaseSessionLease(other!);
    expect(await a.renewSessionLease(other!, 60_000)).toBeNull();
  });

  it("a paused instance whose lease moved cannot write any step of its turn", async () => {
    const { item } = await a.acceptInbound({
      platform: "telegram",
      chatId: "42",
      platformMessageId: "1",
      sessionKey: KEY,
      text: "run it",
      address: { platform: "telegram", chatId: "42" },
    });
    // A starts the turn under a short lease and journals a tool call, then freezes.
    const leaseA = (await a.claimSessionLease(KEY, "A", 1))!;
    const turn = await a.startTurn({
      sessionKey: KEY,
      inboxId: item.id,
      userMessage: { role: "user", content: "run it" },
      lease: leaseA,
    });
    await a.recordToolStart({
      toolCallId: "c1",
      turnId: turn.id,
      sessionId: turn.sessionId,
      name: "terminal",
      arguments: "{}",
      lease: leaseA,
    });
    // Its lease runs out while it is paused; B takes the session over.
    const leaseB = await claimAfterExpiry(b, "B");
    expect(leaseB.fence).toBeGreaterThan(leaseA.fence);

    // A wakes up and carries on with its old token: every write is refused, nothing is stored.
    const before = await b.loadTranscript(turn.sessionId);
    await expect(
      a.recordToolFinish({
        toolCallId: "c1",
        turnId: turn.id,
        sessionId: turn.sessionId,
        result: "stale",
        lease: leaseA,
      }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    await expect(
      a.appendMessages(
        turn.sessionId,
        turn.id,
        [{ role: "assistant", content: "x" }],
        [],
        undefined,
        leaseA,
      ),
    ).rejects.toBeInstanceOf(LeaseLostError);
    await expect(
      a.finishTurn({
        turnId: turn.id,
        state: "done",
        finalMessage: { role: "assistant", content: "stale answer" },
        reply: { address: item.address, text: "stale answer" },
        lease: leaseA,
      }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    await expect(
      a.startTurn({ sessionKey: KEY, inboxId: null, userMessage: null, lease: leaseA }),
    ).rejects.toBeInstanceOf(LeaseLostError);
    expect(await a.renewSessionLease(leaseA, 60_000)).toBeNull();
    expect(await b.loadTranscript(turn.sessionId)).toEqual(before);
    expect((await b.loadTurnHistory(turn.sessionId)).unfinished).toHaveLength(1);
    expect((await b.listRunningTurns()).map((t) => t.id)).toEqual([turn.id]);
    expect(await b.listPendingOutbox()).toEqual([]);

    // The successor's writes go through under its own token.
    await b.finishTurn({
      turnId: turn.id,
      state: "interrupted",
      finalMessage: null,
      reply: null,
      lease: leaseB,
    });
    const resumed = await b.startTurn({
      sessionKey: KEY,
      inboxId: null,
      userMessage: null,
      lease: leaseB,
    });
    await b.finishTurn({
      turnId: resumed.id,
      state: "done",
      finalMessage: { role: "assistant", content: "resumed" },
      reply: { address: item.address, text: "resumed" },
      lease: leaseB,
    });
    expect((await a.listPendingOutbox()).map((o) => o.text)).toEqual(["resumed"]);
  });
});
