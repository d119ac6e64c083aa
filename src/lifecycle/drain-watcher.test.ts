import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import { startDrainWatcher } from "./drain-watcher.js";
import type { GatewayState } from "./lifecycle.js";
import type { Watcher } from "./lifecycle-phase.js";
import { removeDrainRequest, writeDrainRequest } from "./markers.js";

const silent = pino({ level: "silent" });

describe("drain watcher", () => {
  let home: string;
  let phase: GatewayState;
  let calls: string[];
  let watcher: Watcher | null;

  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "keel-drain-"));
    phase = "running";
    calls = [];
    watcher = null;
  });

  afterEach(async () => {
    await watcher?.stop();
    await rm(home, { recursive: true, force: true });
  });

  function start(): Watcher {
    watcher = startDrainWatcher({
      home,
      getPhase: () => phase,
      enterDrain: () => {
        calls.push("enter");
        phase = "draining";
      },
      leaveDrain: () => {
        calls.push("leave");
        phase = "running";
      },
      logger: silent,
      intervalMs: 10,
    });
    return watcher;
  }

  const severalPolls = () => new Promise((resolve) => setTimeout(resolve, 100));

  it("enters drain when the marker appears and leaves when it is removed", async () => {
    start();
    await writeDrainRequest(home, { action: "drain" });
    await waitFor(() => phase === "draining", { timeoutMs: 5000 });
    await removeDrainRequest(home);
    await waitFor(() => phase === "running", { timeoutMs: 5000 });
    expect(calls).toEqual(["enter", "leave"]);
  });

  it("honours a marker that survived a restart on its first check", async () => {
    await writeDrainRequest(home, { action: "drain" });
    start();
    await waitFor(() => calls.length === 1, { timeoutMs: 5000 });
    expect(calls).toEqual(["enter"]);
  });

  it("a corrupt marker counts as a drain request", async () => {
    await writeFile(join(home, ".drain_request.json"), "{not valid json");
    start();
    await waitFor(() => phase === "draining", { timeoutMs: 5000 });
  });

  it("entering is idempotent while the marker stays", async () => {
    await writeDrainRequest(home, { action: "drain" });
    start();
    await waitFor(() => calls.length === 1, { timeoutMs: 5000 });
    await severalPolls();
    expect(calls).toEqual(["enter"]);
  });

  it("does not leave a drain it never entered", async () => {
    start();
    await severalPolls();
    expect(calls).toEqual([]);
  });

  it("leaving never turns a real stop back into running", async () => {
    await writeDrainRequest(home, { action: "drain" });
    start();
    await waitFor(() => phase === "draining", { timeoutMs: 5000 });
    phase = "stopping";
    await removeDrainRequest(home);
    await severalPolls();
    expect(calls).toEqual(["enter"]);
    expect(phase).toBe("stopping");
  });

  it("does not enter drain while starting, but does once running", async () => {
    phase = "starting";
    await writeDrainRequest(home, { action: "drain" });
    start();
    await severalPolls();
    expect(calls).toEqual([]);
    phase = "running";
    await waitFor(() => phase === "draining", { timeoutMs: 5000 });
  });

  it("no callbacks after stop()", async () => {
    const w = start();
    await severalPolls();
    await w.stop();
    await writeDrainRequest(home, { action: "drain" });
    await severalPolls();
    expect(calls).toEqual([]);
  });
});
