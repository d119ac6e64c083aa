/** Memory given back after a busy spell: when it collects, when it does not, and V8's gc(). */
import { setTimeout as sleep } from "node:timers/promises";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { Watcher } from "./lifecycle-phase.js";
import { type MemorySettleOptions, startMemorySettle, v8FullCollection } from "./memory-settle.js";

const BUSY = 0.9;
const QUIET = 0.01;

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
      minSlackBytes: 0,
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

  it("collects twice, once, when the loop stays quiet for two intervals after a busy one", async () => {
    const collections = await run([QUIET, QUIET, QUIET, BUSY, BUSY, QUIET, 0.3, QUIET]);
    // Quiet at first: nothing. The 0.3 (neither busy nor quiet) restarts the quiet count.
    expect(collections()).toBe(2);
  });

  it("never collects for a loop that was never busy", async () => {
    const collections = await run([0.3, QUIET, 0.4, QUIET, QUIET]);
    expect(collections()).toBe(0);
  });

  it("waits while turns are in flight, then collects once they are done", async () => {
    let idle = false;
    const collections = await run([BUSY, QUIET, QUIET, QUIET], { idle: () => idle });
    expect(collections()).toBe(0);
    idle = true;
    await waitFor(() => collections() === 2, { message: "the collections once idle" });
  });

  it("leaves a heap alone that holds little beyond what is live", async () => {
    const collections = await run([BUSY, QUIET, QUIET], { minSlackBytes: Number.MAX_SAFE_INTEGER });
    expect(collections()).toBe(0);
  });

  it("stops trying, with a warning, when a collection fails", async () => {
    const warnings: string[] = [];
    const samples = [BUSY, QUIET, QUIET, BUSY, QUIET, QUIET];
    let calls = 0;
    settle = startMemorySettle({
      logger: pino({ level: "warn" }, { write: (line: string) => warnings.push(line) }),
      isIdle: () => true,
      intervalMs: 5,
      minSlackBytes: 0,
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
  it("fetches V8's gc() without --expose-gc on the command line, and leaves it unexposed", () => {
    const gc = v8FullCollection();
    expect(typeof gc).toBe("function");
    expect(() => gc()).not.toThrow();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});
