/**
 * Start-up recovery with several gateways on one store: a starting instance recovers only the
 * sessions whose lease it can take, never a live instance's running turn.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import type { Store } from "../sessions/store.js";
import { recoverInterruptedWork } from "./recovery.js";

const LIVE = "agent:main:telegram:dm:1";
const DEAD = "agent:main:telegram:dm:2";

describe.each(storeHarnesses())("recovery on a shared $name store", (harness) => {
  let clock = 1_000_000;
  let starting: Store;
  let live: Store;

  beforeEach(async () => {
    clock = 1_000_000;
    await harness.setup();
    starting = await harness.open(() => clock);
    live = await harness.open(() => clock);
  });
  afterEach(async () => {
    await Promise.all([starting.close(), live.close()]);
    await harness.teardown();
  });

  async function runningTurn(store: Store, key: string, owner: string) {
    const lease = (await store.claimSessionLease(key, owner, 600_000))!;
    const turn = await store.startTurn({
      sessionKey: key,
      inboxId: null,
      userMessage: null,
      lease,
    });
    return { lease, turn };
  }

  it("leaves a live instance's running turn alone and recovers the dead one's", async () => {
    const liveTurn = await runningTurn(live, LIVE, "B");
    const dead = await runningTurn(live, DEAD, "C");
    await live.releaseSessionLease(dead.lease); // C is gone: a planned stop, or its TTL ran out.

    const report = await recoverInterruptedWork(starting, {
      cleanShutdown: true,
      now: clock,
      leases: { owner: "A", ttlMs: 600_000 },
    });

    expect(report).toEqual({ interruptedTurns: 1, markedSessions: [DEAD] });
    expect((await live.listRunningTurns()).map((t) => t.id)).toEqual([liveTurn.turn.id]);
    expect((await live.getSession(DEAD))?.resumePending).toBe(true);
    expect((await live.getSession(LIVE))?.resumePending).toBe(false);
    // B keeps writing under its lease; the recovered session's lease is free again.
    await live.finishTurn({
      turnId: liveTurn.turn.id,
      state: "done",
      finalMessage: null,
      reply: null,
      lease: liveTurn.lease,
    });
    expect(await live.claimSessionLease(DEAD, "B", 1000)).not.toBeNull();
  });

  it("a takeover after a newer turn of the session answered marks nothing for a resume", async () => {
    // C dies mid-turn; once its lease has run out, B runs the session's next turn to its end
    // (a new message, or a resume started before any takeover recovered C's turn).
    const cut = await runningTurn(live, DEAD, "C");
    await live.releaseSessionLease(cut.lease); // C's TTL ran out.
    const next = await runningTurn(live, DEAD, "B");
    await live.finishTurn({
      turnId: next.turn.id,
      state: "done",
      finalMessage: { role: "assistant", content: "answered" },
      reply: null,
      lease: next.lease,
    });
    await live.releaseSessionLease(next.lease);

    const report = await recoverInterruptedWork(starting, {
      cleanShutdown: true,
      now: clock,
      leases: { owner: "A:takeover", ttlMs: 600_000 },
    });

    // Nothing to take over: a resume now would answer again what B's turn answered.
    expect(report).toEqual({ interruptedTurns: 0, markedSessions: [] });
    expect((await live.getSession(DEAD))?.resumePending).toBe(false);
    expect(await live.listRunningTurns()).toEqual([]);
  });
});
