/** Memory given back after a busy spell: when it collects, when it does not, and V8's gc(). */
import { setTimeout as sleep } from "node:timers/promises";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { Watcher } from "./lifecycle-phase.js";
import { startMemorySettle, v8FullCollection } from "./memory-settle.js";

/** Keeps the event loop busy (synchronously) for `ms`. */
function busyFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) Math.sqrt(Math.random());
}

describe("startMemorySettle", () => {
  let settle: Watcher | undefined;
  afterEach(async () => {
    await settle?.stop();
  });

  it("collects (twice, once) when the loop goes quiet after a busy spell", async () => {
    let collections = 0;
    settle = startMemorySettle({
      logger: pino({ level: "silent" }),
      intervalMs: 100,
      minSlackBytes: 0,
      collect: () => {
        collections += 1;
      },
    });
    await sleep(350);
    expect(collections).toBe(0);
    for (let i = 0; i < 4; i += 1) {
      busyFor(120);
      await sleep(1);
    }
    await waitFor(() => collections > 0, { message: "a collection" });
    await sleep(400);
    expect(collections).toBe(2);
  });

  it("leaves a heap alone that holds little beyond what is live", async () => {
    let collections = 0;
    settle = startMemorySettle({
      logger: pino({ level: "silent" }),
      intervalMs: 100,
      minSlackBytes: Number.MAX_SAFE_INTEGER,
      collect: () => {
        collections += 1;
      },
    });
    busyFor(250);
    await sleep(600);
    expect(collections).toBe(0);
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
