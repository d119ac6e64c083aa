/**
 * The store contract for start-up recovery's batch calls, on SQLite and Postgres (see
 * store.test.ts): a thousand cut-off sessions are read, leased, closed and let go in a few
 * statements, with what the one-at-a-time calls promise.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import { LeaseLostError, type Store } from "./store.js";

const key = (n: number) => `agent:main:telegram:dm:${n}`;

describe.each(storeHarnesses())("the $name store's batch calls for recovery", (harness) => {
  let store: Store;
  let other: Store;

  beforeEach(async () => {
    await harness.setup();
    store = await harness.open(() => 1_000_000);
    other = await harness.open(() => 1_000_000);
  });
  afterEach(async () => {
    await Promise.all([store.close(), other.close()]);
    await harness.teardown();
  });

  /** A turn started on chat `n` from an inbound message, left running (as a SIGKILL leaves it). */
  async function runningTurn(n: number) {
    const { item } = await store.acceptInbound({
      platform: "telegram",
      chatId: String(n),
      platformMessageId: `m${n}`,
      sessionKey: key(n),
      text: `q${n}`,
      address: { platform: "telegram", chatId: String(n) },
    });
    return store.startTurn({
      sessionKey: key(n),
      inboxId: item.id,
      userMessage: { role: "user", content: `q${n}` },
    });
  }

  it("gives each transcript's last message, leaving out empty ones and unknown ids", async () => {
    const a = await store.ensureSession(key(1), null);
    const b = await store.ensureSession(key(2), null);
    const empty = await store.ensureSession(key(3), null);
    await store.appendMessages(a.sessionId, null, [
      { role: "user", content: "a1" },
      { role: "assistant", content: "a2" },
    ]);
    await store.appendMessages(b.sessionId, null, [{ role: "user", content: "b1" }]);
    // Written after a's: the last message is per transcript, not the newest overall.
    const toolCall = {
      id: "c1",
      type: "function" as const,
      function: { name: "t", arguments: "{}" },
    };
    await store.appendMessages(b.sessionId, null, [
      { role: "assistant", content: null, tool_calls: [toolCall] },
    ]);
    await store.appendMessages(a.sessionId, null, [{ role: "user", content: "a3" }]);

    const last = await store.loadLastMessages([
      a.sessionId,
      b.sessionId,
      empty.sessionId,
      "no-such-session",
      a.sessionId,
    ]);

    expect([...last.keys()].sort()).toEqual([a.sessionId, b.sessionId].sort());
    expect(last.get(a.sessionId)).toEqual({ role: "user", content: "a3" });
    expect(last.get(b.sessionId)).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [toolCall],
    });
    expect(await store.loadLastMessages([])).toEqual(new Map());
  });

  it("claims many leases at once, leaving out those another owner holds live, and lets them go", async () => {
    const held = await other.claimSessionLease(key(2), "B", 60_000);
    const taken = await store.claimSessionLeases([key(1), key(2), key(3), key(1)], "A", 60_000);
    expect([...taken.keys()].sort()).toEqual([key(1), key(3)]);
    expect(taken.get(key(1))).toMatchObject({ sessionKey: key(1), owner: "A" });
    // Held: B cannot take them; A's claim again is a renewal (same fence).
    expect(await other.claimSessionLease(key(1), "B", 60_000)).toBeNull();
    const again = await store.claimSessionLeases([key(3)], "A", 60_000);
    expect(again.get(key(3))?.fence).toBe(taken.get(key(3))?.fence);

    await store.releaseSessionLeases([...taken.values()]);
    // Let go: B takes them at once; B's own lease was not touched.
    expect(await other.claimSessionLease(key(1), "B", 60_000)).not.toBeNull();
    expect(await other.claimSessionLease(key(3), "B", 60_000)).not.toBeNull();
    expect(await store.claimSessionLease(key(2), "A", 60_000)).toBeNull();
    expect(held).not.toBeNull();
    expect(await store.claimSessionLeases([], "A", 60_000)).toEqual(new Map());
    await store.releaseSessionLeases([]);
  });

  it("closes cut-off turns as interrupted with their inbox items, and nothing when a lease moved on", async () => {
    const one = await runningTurn(1);
    const two = await runningTurn(2);
    const three = await runningTurn(3);
    const leases = await store.claimSessionLeases([key(1), key(2), key(3)], "A", 60_000);
    // Key 3's lease moves on to B (its fence rises): A's token for it is stale.
    await store.releaseSessionLease(leases.get(key(3))!);
    await other.claimSessionLease(key(3), "B", 60_000);
    const withLeases = [one, two, three].map((t, i) => ({
      turnId: t.id,
      lease: leases.get(key(i + 1))!,
    }));

    await expect(store.interruptTurns(withLeases)).rejects.toBeInstanceOf(LeaseLostError);
    expect((await store.listRunningTurns()).map((t) => t.id)).toEqual([one.id, two.id, three.id]);

    await store.interruptTurns(withLeases.slice(0, 2));
    expect((await store.listRunningTurns()).map((t) => t.id)).toEqual([three.id]);
    // The closed turns' inbox items are done, the one still running keeps its item taken.
    expect((await store.listOpenInbox()).map((i) => i.sessionKey)).toEqual([key(3)]);
    await store.interruptTurns([{ turnId: three.id }]);
    expect(await store.listRunningTurns()).toEqual([]);
    expect(await store.listOpenInbox()).toEqual([]);
  });
});
