import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../../test/helpers/temp-home.js";
import { SqliteStore } from "../../sessions/sqlite-store.js";
import { DiscordGatewaySession, IdentifyBudget } from "./gateway-session.js";

const logger = pino({ level: "silent" });
const READY = {
  sessionId: "s1",
  resumeURL: "wss://resume",
  sequence: 1,
  shardCount: 1,
  shardId: 0,
};

describe("Discord gateway session in the store", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  beforeEach(() => {
    dir = createTempDir();
    store = new SqliteStore(join(dir.path, "state.db"));
  });
  afterEach(async () => {
    await store.close();
    dir.cleanup();
  });

  it("moves the sequence only when Keel commits, not when the library reports it", async () => {
    const session = new DiscordGatewaySession(store, logger);
    await session.load();
    await session.update(READY);
    // The library reports each dispatch's sequence before the adapter has handled it.
    await session.update({ ...READY, sequence: 9 });
    expect(session.retrieve(0)?.sequence).toBe(1);
    session.commit(4);
    session.commit(3);
    await session.flush();
    const next = new DiscordGatewaySession(store, logger);
    await next.load();
    expect(next.retrieve(0)).toEqual({ ...READY, sequence: 4 });
  });

  it("forgets a lost session and reports when its last event was", async () => {
    let now = 5_000;
    const session = new DiscordGatewaySession(store, logger, () => now);
    await session.load();
    await session.update(READY);
    now = 6_000;
    session.commit(2);
    expect(session.takeLoss()).toBeNull();
    await session.update(null);
    expect(session.retrieve(0)).toBeNull();
    expect(session.takeLoss()).toBe(6_000);
    expect(session.takeLoss()).toBeNull();
    const next = new DiscordGatewaySession(store, logger);
    await next.load();
    expect(next.retrieve(0)).toBeNull();
  });

  it("counts identifies durably, spaces them out and stops at the daily cap", async () => {
    let now = 1_000_000;
    const messages: (string | null)[] = [];
    const budget = () =>
      new IdentifyBudget(
        store,
        { maxPerDay: 2, spacingMs: 1, maxSpacingMs: 1, onExhausted: (m) => messages.push(m) },
        logger,
        () => now,
      );
    const signal = new AbortController().signal;
    await budget().waitForIdentify(0, signal);
    now += 10;
    // A new process reads the count the last one left.
    await budget().waitForIdentify(0, signal);
    expect(await budget().recent()).toHaveLength(2);
    const aborted = new AbortController();
    const third = budget().waitForIdentify(0, aborted.signal);
    await expect.poll(() => messages.some((m) => m?.includes("budget used up"))).toBe(true);
    aborted.abort(new Error("stopped"));
    await expect(third).rejects.toThrow("stopped");
    // A day later the budget is free again.
    now += 86_400_000;
    await budget().waitForIdentify(0, signal);
    expect(await budget().recent()).toHaveLength(1);
  });
});
