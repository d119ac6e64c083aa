import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createRuntimeStatusWriter, readRuntimeStatus } from "./runtime-status.js";

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

  it("writes every update while not draining", async () => {
    const status = writer();
    await status.update({ gateway_state: "running" });
    clock += 10;
    await status.update({ platforms: { webchat: { state: "connected", error: null } } });
    expect((await readRuntimeStatus(home))?.platforms.webchat?.state).toBe("connected");
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
