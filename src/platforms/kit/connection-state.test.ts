import { describe, expect, it } from "vitest";
import { createMemoryLogger } from "../../../test/helpers/memory-logger.js";
import type { PlatformStatus } from "../../contract/platform.js";
import { ConnectionState, RECONNECT_JITTER } from "./connection-state.js";

function connection(stalledAfterMs?: number) {
  const { logger, lines } = createMemoryLogger();
  const changes: PlatformStatus[] = [];
  let now = 1_000;
  const state = new ConnectionState(
    "chat",
    { logger, onStatusChange: (status) => changes.push(status) },
    { backoffBaseMs: 1_000, backoffMaxMs: 30_000 },
    { stalledAfterMs, now: () => now },
  );
  return { state, lines, changes, advance: (ms: number) => (now += ms) };
}

describe("ConnectionState", () => {
  it("reads each status as the health status pages and alerts show", () => {
    const { state } = connection();
    expect(state.report()).toEqual({ state: "disabled", lastEventAt: null });
    state.set("starting");
    expect(state.report().state).toBe("reconnecting");
    state.set("connected");
    expect(state.report().state).toBe("connected");
    state.fail("Cannot reach it; retrying.");
    expect(state.report().state).toBe("reconnecting");
    state.fail("token rejected", { retrying: false });
    expect(state.report().state).toBe("down");
    state.set("connected");
    expect(state.report().state).toBe("connected");
    state.set("stopped");
    expect(state.report().state).toBe("disabled");
  });

  it("is stalled when connected and silent past the platform's bound, and not before", () => {
    const { state, advance } = connection(60_000);
    state.set("connected");
    state.sawEvent();
    expect(state.report()).toEqual({ state: "connected", lastEventAt: 1_000 });
    advance(60_000);
    expect(state.report().state).toBe("connected");
    advance(1);
    expect(state.report().state).toBe("stalled");
    state.sawEvent();
    expect(state.report()).toEqual({ state: "connected", lastEventAt: 61_001 });
  });

  it("is never stalled where silence is normal (no bound given)", () => {
    const { state, advance } = connection();
    state.set("connected");
    state.sawEvent();
    advance(86_400_000);
    expect(state.report().state).toBe("connected");
  });

  it("tells listeners of real changes only, and logs each distinct error once", () => {
    const { state, lines, changes } = connection();
    state.set("starting");
    state.set("starting");
    state.fail("down for a bit");
    state.fail("down for a bit");
    state.fail("down differently");
    state.set("connected");
    expect(changes.map((c) => c.error ?? c.state)).toEqual([
      "starting",
      "down for a bit",
      "down differently",
      "connected",
    ]);
    expect(lines.filter((l) => l.msg === "chat unavailable").map((l) => l.error)).toEqual([
      "down for a bit",
      "down differently",
    ]);
    expect(state.status()).toEqual({ state: "connected", error: null });
  });

  it("ends its waits when the adapter stops, without throwing", async () => {
    const { state } = connection();
    const waiting = state.pause(600_000);
    expect(state.stopped).toBe(false);
    state.stop();
    await waiting;
    expect([state.stopped, state.stopSignal.aborted]).toEqual([true, true]);
    await state.pause(600_000);
  });

  it("backs off within the configured bounds, with jitter below the bound", () => {
    const { state } = connection();
    for (let attempt = 1; attempt <= 8; attempt++) {
      const bound = Math.min(30_000, 1_000 * 2 ** (attempt - 1));
      const wait = state.backoffMs(attempt);
      expect(wait).toBeLessThanOrEqual(bound);
      expect(wait).toBeGreaterThanOrEqual(Math.floor(bound * (1 - RECONNECT_JITTER)));
    }
  });

  it("launches a loop: started after its first attempt; a loop that throws leaves it down", async () => {
    const { state, lines } = connection();
    let release: () => void = () => {};
    const { loop, started } = state.launch(
      async (attempted) => {
        attempted();
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        throw new Error("socket gone");
      },
      {
        waitMs: 60_000,
        crashLog: "chat loop crashed",
        crashStatus: (err) => `Chat stopped unexpectedly: ${(err as Error).message}`,
      },
    );
    await started;
    expect(state.report().state).not.toBe("down");
    release();
    await loop;
    expect(state.status().error).toBe("Chat stopped unexpectedly: socket gone");
    expect(state.report().state).toBe("down");
    expect(lines.some((line) => line.msg === "chat loop crashed")).toBe(true);
  });

  it("launches a loop that never attempts: started once the wait is over", async () => {
    const { state } = connection();
    const { started } = state.launch(() => new Promise<void>(() => {}), {
      waitMs: 10,
      crashLog: "chat loop crashed",
      crashStatus: () => "never",
    });
    await started;
    expect(state.report().state).toBe("disabled");
  });

  it("starts its loop once, never after the stop, and not at all when unconfigured", async () => {
    const { state } = connection();
    let runs = 0;
    const run = async (attempted: () => void) => {
      runs += 1;
      attempted();
      await state.pause(60_000);
    };
    await state.start(run);
    await state.start(run);
    expect(runs).toBe(1);
    expect(state.status().state).toBe("starting");
    state.stop();
    await state.loop;
    await state.start(run);
    expect(runs).toBe(1);

    const unconfigured = connection().state;
    await unconfigured.start(run, "platforms.chat.token is not set; Chat needs it.");
    expect(runs).toBe(1);
    expect(unconfigured.loop).toBeNull();
    expect(unconfigured.status().error).toBe("platforms.chat.token is not set; Chat needs it.");
    expect(unconfigured.report().state).toBe("down");
  });
});
