import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { waitFor } from "../../test/helpers/wait-for.js";
import { writeJsonAtomic } from "../lib/atomic-file.js";
import {
  createRuntimeStatusWriter,
  type RuntimeStatus,
  readRuntimeStatus,
} from "./runtime-status.js";

const logger = pino({ level: "silent" });

describe("runtime status", () => {
  let home: string;
  let clock: number;
  const now = () => clock;

  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "keel-status-"));
    clock = Date.UTC(2026, 0, 1);
  });

  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  function writer() {
    return createRuntimeStatusWriter({ home, pid: 123, startTime: 456, logger, now });
  }

  /** A writer with a short interval that also lists every status it writes. */
  function recordingWriter(writeIntervalMs: number) {
    const written: RuntimeStatus[] = [];
    const status = createRuntimeStatusWriter({
      home,
      pid: 123,
      startTime: 456,
      logger,
      now,
      writeIntervalMs,
      writeJson: async (path, value) => {
        written.push(value as RuntimeStatus);
        await writeJsonAtomic(path, value);
      },
    });
    return { status, written };
  }

  it("writes the interface shape", async () => {
    const status = writer();
    await status.update({
      gateway_state: "running",
      platforms: { telegram: { state: "connected", error: null } },
    });
    expect(await readRuntimeStatus(home)).toEqual({
      pid: 123,
      start_time: 456,
      gateway_state: "running",
      exit_reason: null,
      restart_requested: false,
      active_turns: 0,
      platforms: { telegram: { state: "connected", error: null } },
      updated_at: new Date(clock).toISOString(),
    });
  });

  it("coalesces updates made while a write runs: one more write, with the newest status", async () => {
    const { status, written } = recordingWriter(1000);
    const updates: Promise<void>[] = [];
    for (let turns = 1; turns <= 1000; turns += 1) {
      updates.push(status.update({ active_turns: turns }));
    }
    await Promise.all(updates);
    // A write starts on the next tick with the newest status, so the thousand changes made
    // meanwhile go out as one write (they used to queue a thousand).
    expect(written.map((w) => w.active_turns)).toEqual([1000]);
    expect((await readRuntimeStatus(home))?.active_turns).toBe(1000);
  });

  it("writes every update while not draining", async () => {
    const status = writer();
    await status.update({ gateway_state: "running" });
    clock += 10;
    await status.update({ platforms: { webchat: { state: "connected", error: null } } });
    expect((await readRuntimeStatus(home))?.platforms.webchat?.state).toBe("connected");
  });

  it("while running, writes a turn count change at most once an interval, and the last one within it", async () => {
    const { status, written } = recordingWriter(50);
    const counts = () => written.map((w) => w.active_turns);
    await status.update({ gateway_state: "running" });
    for (let turns = 1; turns <= 100; turns += 1) {
      await status.update({ active_turns: turns % 2 });
    }
    await status.update({ active_turns: 7 });
    // Held: nothing but the first write yet, and the file still says 0.
    expect(counts()).toEqual([0]);
    expect((await readRuntimeStatus(home))?.active_turns).toBe(0);
    await waitFor(async () => (await readRuntimeStatus(home))?.active_turns === 7);
    expect(counts()).toEqual([0, 7]);
  });

  it("after close, writes what was held and then nothing more", async () => {
    const { status, written } = recordingWriter(20);
    await status.update({ gateway_state: "running" });
    await status.update({ active_turns: 1 });
    await status.close();
    expect(written.map((w) => w.gateway_state)).toEqual(["running", "running"]);
    await status.update({ active_turns: 0 });
    await status.update({ gateway_state: "starting" });
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(written).toHaveLength(2);
    expect((await readRuntimeStatus(home))?.active_turns).toBe(1);
  });

  it("throttles draining writes to one per second but always writes an active_turns change", async () => {
    const status = writer();
    await status.update({ gateway_state: "draining", active_turns: 2 });
    clock += 100;
    await status.update({ platforms: { telegram: { state: "connected", error: null } } });
    expect((await readRuntimeStatus(home))?.platforms).toEqual({});

    clock += 100;
    await status.update({ active_turns: 1 });
    const afterCountChange = await readRuntimeStatus(home);
    expect(afterCountChange?.active_turns).toBe(1);
    expect(afterCountChange?.platforms.telegram?.state).toBe("connected");

    clock += 500;
    await status.update({ exit_reason: "held" });
    expect((await readRuntimeStatus(home))?.exit_reason).toBeNull();
    clock += 600;
    await status.update({ restart_requested: true });
    expect(await readRuntimeStatus(home)).toMatchObject({
      exit_reason: "held",
      restart_requested: true,
    });
  });

  it("always writes a gateway_state change even within the draining interval", async () => {
    const status = writer();
    await status.update({ gateway_state: "draining", active_turns: 1 });
    clock += 10;
    await status.update({ gateway_state: "stopped" });
    expect((await readRuntimeStatus(home))?.gateway_state).toBe("stopped");
  });

  it("flush writes a throttled change", async () => {
    const status = writer();
    await status.update({ gateway_state: "draining" });
    clock += 10;
    await status.update({ exit_reason: "late" });
    expect((await readRuntimeStatus(home))?.exit_reason).toBeNull();
    await status.flush();
    expect((await readRuntimeStatus(home))?.exit_reason).toBe("late");
  });

  it("a drain where two turns finish one by one makes three writes", async () => {
    const writes: string[] = [];
    const status = writer();
    const record = async () => {
      const current = await readRuntimeStatus(home);
      if (current !== null && writes.at(-1) !== JSON.stringify(current))
        writes.push(JSON.stringify(current));
    };
    await status.update({ gateway_state: "draining", active_turns: 2 });
    await record();
    for (const turns of [2, 2, 1, 1, 1, 0]) {
      clock += 120;
      await status.update({ active_turns: turns });
      await record();
    }
    expect(writes).toHaveLength(3);
  });

  it("creates a missing home folder and reads a missing file as null", async () => {
    const nested = join(home, "nested");
    expect(await readRuntimeStatus(nested)).toBeNull();
    const status = createRuntimeStatusWriter({ home: nested, pid: 1, startTime: 2, logger, now });
    await status.update({ gateway_state: "running" });
    expect((await readRuntimeStatus(nested))?.gateway_state).toBe("running");
  });

  it("reads a corrupt file as null", async () => {
    await writeFile(join(home, "gateway_state.json"), "{oops");
    expect(await readRuntimeStatus(home)).toBeNull();
  });
});
