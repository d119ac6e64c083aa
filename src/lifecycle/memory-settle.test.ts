/** Memory given back after a busy spell: when it collects, when it does not, and V8's gc(). */
import { memoryUsage } from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { getHeapSpaceStatistics } from "node:v8";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { Watcher } from "./lifecycle-phase.js";
import { type MemorySettleOptions, startMemorySettle, v8FullCollection } from "./memory-settle.js";

const BUSY = 0.9;
const QUIET = 0.01;
const quiet = (n: number) => Array.from({ length: n }, () => QUIET);

describe("startMemorySettle", () => {
  let settle: Watcher | undefined;
  afterEach(async () => {
    await settle?.stop();
  });

  /** Feeds `utilisation` one interval at a time (then quiet) and counts the collections. */
  async function run(
    utilisation: number[],
    options: Partial<MemorySettleOptions> & { idle?: () => boolean } = {},
  ) {
    const samples = [...utilisation];
    let collections = 0;
    settle = startMemorySettle({
      logger: pino({ level: "silent" }),
      isIdle: options.idle ?? (() => true),
      intervalMs: 5,
      minGrowthBytes: 0,
      afterStartUp: false,
      youngGenerationFollowUp: false,
      sampleUtilisation: () => samples.shift() ?? QUIET,
      collect: () => {
        collections += 1;
      },
      ...options,
    });
    await waitFor(() => samples.length === 0, { message: "every sample read" });
    await sleep(50);
    return () => collections;
  }

  it("collects once when the loop stays quiet for two intervals after a busy one", async () => {
    const collections = await run([QUIET, QUIET, QUIET, BUSY, BUSY, QUIET, 0.3, QUIET]);
    // Quiet at first: nothing. The 0.3 (neither busy nor quiet) restarts the quiet count; then
    // quiet intervals go on (`run` samples QUIET once the list is read) and it collects once.
    expect(collections()).toBe(1);
  });

  it("never collects for a loop that was never busy", async () => {
    const collections = await run([0.3, QUIET, 0.4, QUIET, QUIET]);
    expect(collections()).toBe(0);
  });

  it("settles once after start-up, whatever the growth, then waits for a busy spell", async () => {
    const collections = await run([QUIET, QUIET, QUIET, QUIET], {
      afterStartUp: true,
      minGrowthBytes: 1024 * 1024 * 1024,
    });
    expect(collections()).toBe(1);
  });

  it("waits while turns are in flight, then collects once they are done", async () => {
    let idle = false;
    const collections = await run([BUSY, QUIET, QUIET, QUIET], { idle: () => idle });
    expect(collections()).toBe(0);
    idle = true;
    await waitFor(() => collections() === 1, { message: "the collection once idle" });
  });

  it("leaves alone a busy spell that did not grow the heap, and collects after one that did", async () => {
    const minGrowthBytes = 16 * 1024 * 1024;
    const quietHeap = await run([BUSY, QUIET, QUIET], { minGrowthBytes });
    expect(quietHeap()).toBe(0);
    await settle?.stop();
    // From a collected heap: a young generation that earlier tests grew could otherwise shrink
    // while `held` is built (Node 24 under load) and hide the growth from the committed figure.
    v8FullCollection()();
    let samples: number[] = [];
    let collections = 0;
    settle = startMemorySettle({
      logger: pino({ level: "silent" }),
      isIdle: () => true,
      intervalMs: 5,
      minGrowthBytes,
      afterStartUp: false,
      sampleUtilisation: () => samples.shift() ?? QUIET,
      collect: () => {
        collections += 1;
      },
    });
    // Held until the check: the heap V8 commits for them is the growth a busy spell leaves.
    const held = Array.from({ length: 400 }, (_, i) =>
      Array.from({ length: 1000 }, (_, j) => `${i}:${j}:${"x".repeat(40)}`),
    );
    samples = [BUSY, QUIET, QUIET];
    await waitFor(() => collections === 1, { message: "a collection after the heap grew" });
    expect(held.length).toBe(400);
  });

  it("counts growth from the heap's lowest point, which V8 may reach by itself", async () => {
    const mb = 1024 * 1024;
    // Committed heap per interval: 100 MB at start, shrunk by V8 to 60, grown to 90 by a busy
    // spell. 30 MB over the lowest point is a settle's worth; over the first reading it is none.
    const heap = [100, 60, 90, 90, 90];
    const collections = await run([QUIET, BUSY, QUIET, QUIET], {
      minGrowthBytes: 24 * mb,
      committedHeap: () => (heap.length > 1 ? (heap.shift() as number) : (heap[0] as number)) * mb,
    });
    expect(collections()).toBe(1);
  });

  it("collects after a busy spell with no growth threshold even if V8 shrank the heap", async () => {
    const mb = 1024 * 1024;
    const heap = [100, 50, 50, 50];
    const collections = await run([BUSY, QUIET, QUIET], {
      committedHeap: () => (heap.length > 1 ? (heap.shift() as number) : (heap[0] as number)) * mb,
    });
    expect(collections()).toBe(1);
  });

  /**
   * With the follow-up on: feeds `samples`, then neither-busy-nor-quiet intervals until
   * `thenQuiet()` switches to quiet ones; `collections()` counts.
   */
  async function runFollowUp(samples: number[]) {
    let after = 0.3;
    const collections = await run([], {
      youngGenerationFollowUp: true,
      sampleUtilisation: () => samples.shift() ?? after,
    });
    await waitFor(() => samples.length === 0, { message: "every sample read" });
    await sleep(50);
    return {
      collections,
      thenQuiet: () => {
        after = QUIET;
      },
    };
  }

  it("collects once more after six quiet intervals in a row since the settle's collection", async () => {
    // The settle collects at the third sample (second quiet interval); five quiet ones follow.
    const { collections, thenQuiet } = await runFollowUp([BUSY, QUIET, QUIET, ...quiet(5)]);
    expect(collections()).toBe(1);
    thenQuiet();
    await waitFor(() => collections() === 2, { message: "the follow-up" });
    await sleep(50);
    expect(collections()).toBe(2);
  });

  it("puts the follow-up off while the loop is not quiet, and runs it once", async () => {
    const { collections, thenQuiet } = await runFollowUp([BUSY, ...quiet(6), 0.3, ...quiet(3)]);
    // The settle ran at the second quiet interval; four quiet ones after it, then the 0.3
    // restarted the count, and three quiet ones since are not enough.
    expect(collections()).toBe(1);
    thenQuiet();
    await waitFor(() => collections() === 2, { message: "the follow-up once quiet again" });
    await sleep(100);
    expect(collections()).toBe(2);
  });

  it("does not count the interval of its own collection as the gateway's work", async () => {
    // The interval after the settle's collection reads busy (the collection's own time): it
    // neither starts a new busy spell nor breaks the quiet count, so the follow-up comes after
    // five more quiet ones, and nothing after it.
    const { collections, thenQuiet } = await runFollowUp([BUSY, QUIET, QUIET, BUSY, ...quiet(5)]);
    expect(collections()).toBe(2);
    thenQuiet();
    await sleep(100);
    expect(collections()).toBe(2);
  });

  it("stops trying, with a warning, when a collection fails", async () => {
    const warnings: string[] = [];
    const samples = [BUSY, QUIET, QUIET, BUSY, QUIET, QUIET];
    let calls = 0;
    settle = startMemorySettle({
      logger: pino({ level: "warn" }, { write: (line: string) => warnings.push(line) }),
      isIdle: () => true,
      intervalMs: 5,
      minGrowthBytes: 0,
      afterStartUp: false,
      sampleUtilisation: () => samples.shift() ?? QUIET,
      collect: () => {
        calls += 1;
        throw new Error("no gc here");
      },
    });
    await waitFor(() => warnings.join("").includes("cannot collect the heap"));
    await sleep(50);
    // Stopped at the first failure: the second busy spell was never even sampled.
    expect(calls).toBe(1);
    expect(samples.length).toBe(3);
  });
});

describe("v8FullCollection", () => {
  const v8Major = Number(process.versions.v8.split(".")[0]);
  const mb = 1024 * 1024;
  const spaceSize = (name: string) =>
    getHeapSpaceStatistics().find((space) => space.space_name === name)?.space_size ?? 0;

  it("fetches V8's gc() without --expose-gc on the command line, and leaves it unexposed", () => {
    const collect = v8FullCollection();
    expect(typeof collect).toBe("function");
    expect(() => collect()).not.toThrow();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });

  it("gives back a heap that held objects no longer reachable", () => {
    let held: string[][] | undefined = Array.from({ length: 400 }, (_, i) =>
      Array.from({ length: 1000 }, (_, j) => `${i}:${j}:${"x".repeat(40)}`),
    );
    const before = memoryUsage().heapUsed;
    expect(held.length).toBe(400);
    held = undefined;
    v8FullCollection()();
    expect(before - memoryUsage().heapUsed).toBeGreaterThan(20 * mb);
  });

  /** Short-lived garbage (a high allocation rate) until the young generation has grown. */
  function growYoungGeneration(): void {
    let sink = 0;
    for (let round = 0; round < 200 && (round < 20 || spaceSize("new_space") <= 4 * mb); round++) {
      sink += Array.from({ length: 20_000 }, (_, i) => ({ i, s: `${round}-${i}` })).length;
    }
    expect(sink).toBeGreaterThan(0);
    expect(spaceSize("new_space")).toBeGreaterThan(4 * mb);
  }

  it.runIf(v8Major >= 12)(
    "shrinks a grown young generation where V8 has last-resort collections",
    () => {
      growYoungGeneration();
      v8FullCollection()();
      expect(spaceSize("new_space")).toBeLessThanOrEqual(4 * mb);
    },
  );
});
