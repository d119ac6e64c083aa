import { access, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createMemoryLogger } from "../../test/helpers/memory-logger.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { GatewayState } from "./lifecycle.js";
import type { Watcher } from "./lifecycle-phase.js";
import { writePlannedStop } from "./markers.js";
import { startPlannedStopWatcher } from "./planned-stop-watcher.js";

const SELF = { pid: 4321, startTime: 1_000_000 };
const silent = pino({ level: "silent" });

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

describe("planned-stop watcher", () => {
  let root: string;
  let home: string;
  let phase: GatewayState;
  let fired: number;
  let watcher: Watcher | null;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "keel-planned-"));
    home = join(root, "home");
    phase = "running";
    fired = 0;
    watcher = null;
  });

  afterEach(async () => {
    await watcher?.stop();
    await rm(root, { recursive: true, force: true });
  });

  function start(overrides: { intervalMs?: number; logger?: pino.Logger } = {}): Watcher {
    watcher = startPlannedStopWatcher({
      home,
      self: SELF,
      getPhase: () => phase,
      onPlannedStop: () => {
        fired++;
      },
      logger: overrides.logger ?? silent,
      intervalMs: overrides.intervalMs ?? 10,
    });
    return watcher;
  }

  /** Lets the watcher poll several times (each poll reads the home folder). */
  async function severalPolls(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  it("fires the planned stop when a marker for this pid appears, and consumes it", async () => {
    start();
    await severalPolls();
    expect(fired).toBe(0);
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    await waitFor(() => fired === 1, { timeoutMs: 5000 });
    expect(await exists(join(home, ".planned_stop.json"))).toBe(false);
  });

  it("does not fire when no marker exists", async () => {
    start();
    await severalPolls();
    expect(fired).toBe(0);
  });

  it("ignores a planned-stop marker written for another pid and leaves it", async () => {
    await writePlannedStop(home, { pid: SELF.pid + 1, startTime: null, now: Date.now() });
    start();
    await severalPolls();
    expect(fired).toBe(0);
    expect(await exists(join(home, ".planned_stop.json"))).toBe(true);
  });

  it("ignores a marker for this pid with another start time (a reused pid)", async () => {
    await writePlannedStop(home, {
      pid: SELF.pid,
      startTime: SELF.startTime - 60_000,
      now: Date.now(),
    });
    start();
    await severalPolls();
    expect(fired).toBe(0);
  });

  it("does nothing while the gateway is already stopping", async () => {
    phase = "stopping";
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    start();
    await severalPolls();
    expect(fired).toBe(0);
    expect(await exists(join(home, ".planned_stop.json"))).toBe(true);
  });

  it("does nothing before the gateway is running, then fires once it is", async () => {
    phase = "starting";
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    start();
    await severalPolls();
    expect(fired).toBe(0);
    phase = "running";
    await waitFor(() => fired === 1, { timeoutMs: 5000 });
  });

  it("fires during a maintenance drain (an operator stop still works)", async () => {
    phase = "draining";
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    start();
    await waitFor(() => fired === 1, { timeoutMs: 5000 });
  });

  it("fires only once even when the marker keeps reappearing", async () => {
    start();
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    await waitFor(() => fired === 1, { timeoutMs: 5000 });
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    await severalPolls();
    expect(fired).toBe(1);
    expect(await exists(join(home, ".planned_stop.json"))).toBe(true);
  });

  it("stops promptly even with a long poll interval, and never fires afterwards", async () => {
    const w = start({ intervalMs: 10 * 60_000 });
    await severalPolls();
    await w.stop();
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    await severalPolls();
    expect(fired).toBe(0);
  });

  it("survives file-system errors: logs them and keeps polling", async () => {
    // A plain file where the home folder should be makes every read fail with ENOTDIR.
    await writeFile(home, "not a folder");
    const { logger, lines } = createMemoryLogger();
    start({ logger });
    await waitFor(
      () => lines.filter((line) => line.msg === "planned-stop marker check failed").length >= 2,
      {
        timeoutMs: 5000,
      },
    );
    expect(fired).toBe(0);
    await rm(home);
    await mkdir(home);
    await writePlannedStop(home, { pid: SELF.pid, startTime: SELF.startTime, now: Date.now() });
    await waitFor(() => fired === 1, { timeoutMs: 5000 });
  });

  it("removes a stale marker for this pid without firing", async () => {
    await writePlannedStop(home, {
      pid: SELF.pid,
      startTime: SELF.startTime,
      now: Date.now() - 120_000,
    });
    start();
    await waitFor(async () => !(await exists(join(home, ".planned_stop.json"))), {
      timeoutMs: 5000,
    });
    expect(fired).toBe(0);
  });
});
