import { describe, expect, it } from "vitest";
import type { GatewayStatus } from "./control-surface.js";
import { createStatusFeed } from "./status-feed.js";

/** A surface whose status is a counter, so each computation is visible. */
function countingSurface() {
  const listeners = new Set<() => void>();
  let computed = 0;
  return {
    get computed() {
      return computed;
    },
    listeners,
    change: () => {
      for (const listener of listeners) listener();
    },
    status: async () => {
      computed += 1;
      return { uptime_seconds: computed } as GatewayStatus;
    },
    onStatusChange(listener: () => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("createStatusFeed", () => {
  it("computes the status once per change for all clients, and never without one", async () => {
    const surface = countingSurface();
    const feed = createStatusFeed(surface, (err) => {
      throw err;
    });
    const seen: number[][] = [[], [], []];
    const unsubscribes = seen.map((list) =>
      feed.subscribe((status) => list.push(status.uptime_seconds)),
    );
    await settle();
    const afterSubscribing = surface.computed;
    // One listener on the gateway however many clients there are.
    expect(surface.listeners.size).toBe(1);

    surface.change();
    await settle();
    expect(surface.computed).toBe(afterSubscribing + 1);
    for (const list of seen) expect(list.at(-1)).toBe(afterSubscribing + 1);

    await settle();
    expect(surface.computed).toBe(afterSubscribing + 1);

    for (const unsubscribe of unsubscribes) unsubscribe();
    expect(surface.listeners.size).toBe(0);
  });

  it("folds changes that arrive during a computation into one more", async () => {
    const surface = countingSurface();
    const feed = createStatusFeed(surface, () => {});
    const seen: number[] = [];
    feed.subscribe((status) => seen.push(status.uptime_seconds));
    surface.change();
    surface.change();
    surface.change();
    await settle();
    await settle();
    expect(surface.computed).toBe(2);
    expect(seen).toEqual([1, 2]);
  });
});
