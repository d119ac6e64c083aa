import { access, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  consumeCleanShutdown,
  consumePlannedStopForSelf,
  consumeRestartNotify,
  consumeRestartPending,
  matchPlannedStop,
  readDrainRequest,
  readPlannedStop,
  removeDrainRequest,
  writeCleanShutdown,
  writeDrainRequest,
  writePlannedStop,
  writeRestartNotify,
  writeRestartPending,
} from "./markers.js";

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

describe("markers", () => {
  let root: string;
  let home: string;

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), "keel-markers-"));
    home = join(root, "home");
  });

  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("clean shutdown marker is consumed once", async () => {
    expect(await consumeCleanShutdown(home)).toBe(false);
    await writeCleanShutdown(home, 1000);
    expect(await consumeCleanShutdown(home)).toBe(true);
    expect(await consumeCleanShutdown(home)).toBe(false);
  });

  it("restart notify round-trips and is removed when read", async () => {
    const notify = {
      platform: "telegram",
      chat_id: "42",
      thread_id: "7",
      message_id: "m1",
      requested_at: 5,
    };
    await writeRestartNotify(home, notify);
    expect(await consumeRestartNotify(home)).toEqual(notify);
    expect(await consumeRestartNotify(home)).toBeNull();
  });

  it("a malformed restart notify is removed and ignored", async () => {
    await writeRestartNotify(home, {
      platform: "telegram",
      chat_id: "1",
      thread_id: null,
      message_id: null,
      requested_at: 1,
    });
    await writeFile(join(home, ".restart_notify.json"), "[]");
    expect(await consumeRestartNotify(home)).toBeNull();
    expect(await exists(join(home, ".restart_notify.json"))).toBe(false);
  });

  it("restart pending round-trips", async () => {
    await writeRestartPending(home, { requested_at: 9, via_service: true, detached: false });
    expect(JSON.parse(await readFile(join(home, ".restart_pending.json"), "utf8"))).toEqual({
      requested_at: 9,
      via_service: true,
      detached: false,
    });
    expect(await consumeRestartPending(home)).toEqual({
      requested_at: 9,
      via_service: true,
      detached: false,
    });
    expect(await consumeRestartPending(home)).toBeNull();
  });

  it("planned stop marker has the interface shape", async () => {
    await writePlannedStop(home, { pid: 77, startTime: 1234, now: 99 });
    expect(JSON.parse(await readFile(join(home, ".planned_stop.json"), "utf8"))).toEqual({
      target_pid: 77,
      target_start_time: 1234,
      written_at: 99,
    });
    expect(await readPlannedStop(home)).toEqual({
      kind: "ok",
      marker: { target_pid: 77, target_start_time: 1234, written_at: 99 },
    });
  });

  it("matches a planned stop by pid, start time and age", () => {
    const self = { pid: 10, startTime: 5000 };
    const marker = { target_pid: 10, target_start_time: 5000, written_at: 1000 };
    expect(matchPlannedStop(marker, self, 2000)).toBe("self");
    expect(matchPlannedStop({ ...marker, target_pid: 11 }, self, 2000)).toBe("other");
    expect(matchPlannedStop({ ...marker, target_start_time: 99_000 }, self, 2000)).toBe("other");
    expect(matchPlannedStop({ ...marker, target_start_time: null }, self, 2000)).toBe("self");
    expect(matchPlannedStop({ ...marker, written_at: null }, self, 10_000_000)).toBe("self");
    expect(matchPlannedStop(marker, self, 1000 + 60_001)).toBe("stale");
  });

  it("consuming for self removes a matching marker and leaves another pid's marker", async () => {
    await writePlannedStop(home, { pid: 11, startTime: null, now: 0 });
    expect(await consumePlannedStopForSelf(home, { pid: 10, startTime: null }, 0)).toBe(false);
    expect((await readPlannedStop(home)).kind).toBe("ok");
    await writePlannedStop(home, { pid: 10, startTime: null, now: 0 });
    expect(await consumePlannedStopForSelf(home, { pid: 10, startTime: null }, 0)).toBe(true);
    expect((await readPlannedStop(home)).kind).toBe("missing");
  });

  it("a stale planned stop for self is removed without matching", async () => {
    await writePlannedStop(home, { pid: 10, startTime: null, now: 0 });
    expect(await consumePlannedStopForSelf(home, { pid: 10, startTime: null }, 120_000)).toBe(
      false,
    );
    expect((await readPlannedStop(home)).kind).toBe("missing");
  });

  it("drain request: absent, present, removed, idempotent removal", async () => {
    expect(await readDrainRequest(home)).toBeNull();
    await writeDrainRequest(home, { action: "drain", principal: "ops" });
    expect(await readDrainRequest(home)).toEqual({ action: "drain", principal: "ops" });
    expect(await removeDrainRequest(home)).toBe(true);
    expect(await readDrainRequest(home)).toBeNull();
    expect(await removeDrainRequest(home)).toBe(false);
  });

  it("a corrupt drain request reads as present with an empty body", async () => {
    await writeDrainRequest(home, {});
    await writeFile(join(home, ".drain_request.json"), "{not valid json");
    expect(await readDrainRequest(home)).toEqual({});
  });

  it("writes leave no temp files behind", async () => {
    await writeDrainRequest(home, { action: "drain" });
    await writePlannedStop(home, { pid: 1, startTime: null, now: 0 });
    expect((await readdir(home)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });
});
