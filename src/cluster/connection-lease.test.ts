/**
 * The lease on a platform connection, over each real store: one holder at a time, a standby
 * takes over once the holder lets go or stops renewing, and a holder that loses the lease (or
 * its database) is told so.
 */
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { storeHarnesses } from "../../test/helpers/store-harness.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { Store } from "../sessions/store.js";
import { connectionLeaseKey, StoreConnectionLease } from "./connection-lease.js";

const KEY = connectionLeaseKey("telegram", "123456:secret-token");

describe.each(storeHarnesses())("connection leases on the $name store", (harness) => {
  let a: Store;
  let b: Store;
  /** The gateway's stop (aborted after each test). */
  let stop: AbortController;

  beforeEach(async () => {
    await harness.setup();
    a = await harness.open();
    b = await harness.open();
    stop = new AbortController();
  });
  afterEach(async () => {
    stop.abort();
    await Promise.all([a.close(), b.close()]);
    await harness.teardown();
  });

  function lease(store: Store, owner: string, ttlMs: number): StoreConnectionLease {
    return new StoreConnectionLease({
      store,
      key: KEY,
      owner,
      ttlMs,
      logger: pino({ level: "silent" }),
      claimEveryMs: 20,
    });
  }

  it("names the lease by platform and a hash of the token, never the token", () => {
    expect(KEY).toMatch(/^poller:telegram:[0-9a-f]{16}$/);
    expect(KEY).not.toContain("secret");
    expect(connectionLeaseKey("telegram", "other")).not.toBe(KEY);
  });

  it("one holder at a time: the standby takes over when the holder lets go", async () => {
    const first = lease(a, "A", 60_000);
    const second = lease(b, "B", 60_000);
    const held = await first.acquire(stop.signal);
    expect(held?.aborted).toBe(false);
    let standby: AbortSignal | null | undefined;
    const waiting = second.acquire(stop.signal).then((s) => {
      standby = s;
    });
    // The standby keeps trying while A holds it.
    await waitFor(async () => (await b.listSessionLeases()).length === 1);
    expect(standby).toBeUndefined();
    await first.release();
    expect(held?.aborted).toBe(true);
    await waiting;
    expect(standby?.aborted).toBe(false);
    expect((await a.listSessionLeases()).find((l) => l.sessionKey === KEY)?.owner).toBe("B");
    await second.release();
  });

  it("a holder that stops renewing (it died) is replaced once its TTL has run out", async () => {
    // The dead holder claimed with a short TTL and never renewed.
    expect(await a.claimSessionLease(KEY, "A", 200)).not.toBeNull();
    const survivor = lease(b, "B", 60_000);
    const held = await survivor.acquire(stop.signal);
    expect(held).not.toBeNull();
    const row = (await b.listSessionLeases()).find((l) => l.sessionKey === KEY);
    expect(row).toMatchObject({ owner: "B", fence: 2 });
    await survivor.release();
  });

  it("tells the holder when its lease moved to another gateway", async () => {
    const first = lease(a, "A", 400);
    const held = await first.acquire(stop.signal);
    // A is presumed gone (its instance row removed frees its leases) and B claims the lease.
    await b.removeInstance("A");
    expect(await b.claimSessionLease(KEY, "B", 60_000)).not.toBeNull();
    await waitFor(() => held?.aborted, { message: "A told its lease moved on" });
  });

  it("a holder that cannot reach its database lets go before its lease can run out", async () => {
    const first = lease(a, "A", 400);
    const held = await first.acquire(stop.signal);
    await a.close();
    await waitFor(() => held?.aborted, { message: "A gave the connection up" });
    a = await harness.open();
  });

  it("a standby stops waiting when its gateway stops", async () => {
    await lease(a, "A", 60_000).acquire(stop.signal);
    const own = new AbortController();
    const waiting = lease(b, "B", 60_000).acquire(own.signal);
    own.abort();
    expect(await waiting).toBeNull();
  });
});
