import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { SqliteStore } from "../sessions/sqlite-store.js";
import { ScheduleBook } from "./book.js";
import { Scheduler, type SchedulerTimers } from "./scheduler.js";

const START = Date.parse("2026-11-26T08:00:00Z");

/** Timers the test fires by hand: what the loop armed, and for how long. */
class ManualTimers implements SchedulerTimers {
  armed: { fn: () => void; ms: number; handle: number }[] = [];
  private next = 0;
  set(fn: () => void, ms: number): unknown {
    const handle = ++this.next;
    this.armed.push({ fn, ms, handle });
    return handle;
  }
  clear(handle: unknown): void {
    this.armed = this.armed.filter((t) => t.handle !== handle);
  }
  /** Fires the one armed timer. */
  fire(): void {
    expect(this.armed).toHaveLength(1);
    this.armed.shift()!.fn();
  }
}

describe("the scheduler loop", () => {
  let dir: ReturnType<typeof createTempDir>;
  let store: SqliteStore;
  let clock: number;
  let timers: ManualTimers;
  let scheduler: Scheduler;
  let book: ScheduleBook;

  beforeEach(() => {
    dir = createTempDir();
    clock = START;
    store = new SqliteStore(join(dir.path, "state.db"), { now: () => clock });
    timers = new ManualTimers();
    scheduler = new Scheduler({
      store,
      // The runner's intake minus the dispatch: the inbox row and the advance, committed together.
      intake: (message, advance) => store.acceptInbound(message, advance),
      notify: async () => {},
      logger: pino({ level: "silent" }),
      now: () => clock,
      timers,
      rescanMs: 5000,
    });
    book = new ScheduleBook(store, () => clock);
  });
  afterEach(async () => {
    await scheduler.stop();
    await store.close();
    dir.cleanup();
  });

  /**
   * Waits until the loop has armed its next timer (a pass is done). Bounded in time, not in turns
   * of the event loop: a pass that writes waits for the WAL's fsync on the thread pool.
   */
  const settled = () =>
    waitFor(() => timers.armed.length === 1, { intervalMs: 1, message: "the loop re-armed" });

  const fires = async () =>
    (await store.listOpenInbox())
      .filter((i) => i.platform === "schedule")
      .map((i) => i.platformMessageId);

  it("sleeps until the next slot (at most the rescan interval), then fires it once", async () => {
    await book.create({ name: "t", every: "3s", prompt: "p", createdBy: "cli" });
    scheduler.start();
    await settled();
    expect(timers.armed[0]!.ms).toBe(3000);
    clock = START + 3000;
    timers.fire();
    await settled();
    expect(await fires()).toEqual(["2026-11-26T08:00:03.000Z"]);
    expect((await store.getScheduleJob("t"))?.nextFireAt).toBe(START + 6000);
  });

  it("a job whose fire is still open waits, and catches up once when it closes", async () => {
    await book.create({ name: "t", every: "1s", prompt: "p", createdBy: "cli" });
    scheduler.start();
    await settled();
    clock = START + 1000;
    timers.fire();
    await settled();
    // Four more slots pass while the first fire is still pending: nothing new is fired.
    clock = START + 5000;
    timers.fire();
    await settled();
    expect(await fires()).toEqual(["2026-11-26T08:00:01.000Z"]);
    const [open] = await store.listOpenInbox();
    await store.closeInboxItem(open!.id, "done");
    await scheduler.onTurnEnd({ sessionKey: "agent:main:schedule:t", stopReason: "stop" });
    await settled();
    const [catchUp] = await store.listOpenInbox();
    expect(catchUp?.platformMessageId).toBe("2026-11-26T08:00:05.000Z");
    expect(catchUp?.text).toMatch(/catch-up run.*3 earlier runs were missed/s);
  });

  it("a job added by another process is seen at the next rescan", async () => {
    scheduler.start();
    await settled();
    expect(timers.armed[0]!.ms).toBe(5000);
    const other = new SqliteStore(join(dir.path, "state.db"), { now: () => clock });
    await new ScheduleBook(other, () => clock).create({
      name: "cli",
      at: "+1s",
      prompt: "p",
      createdBy: "cli",
    });
    await other.close();
    clock = START + 5000;
    timers.fire();
    await settled();
    expect(await fires()).toEqual(["2026-11-26T08:00:01.000Z"]);
    expect(await store.getScheduleJob("cli")).toBeNull();
  });

  it("fires nothing once stopped", async () => {
    await book.create({ name: "t", every: "1s", prompt: "p", createdBy: "cli" });
    scheduler.start();
    await settled();
    await scheduler.stop();
    expect(timers.armed).toHaveLength(0);
    clock = START + 10_000;
    scheduler.kick();
    expect(timers.armed).toHaveLength(0);
    expect(await fires()).toEqual([]);
  });
});
