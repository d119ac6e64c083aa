import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Sleeper, spawnSleeper } from "../../test/helpers/sleeper.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { acquirePidFile, argvLooksLikeKeel, isGatewayAlive, readPidFile } from "./pid-file.js";
import { readProcessArgv, readProcessStartTime } from "./process-info.js";

const KEEL_ARGS = ["keel", "gateway", "run"];

describe("pid file", () => {
  let home: string;
  const sleepers: Sleeper[] = [];

  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "keel-pid-"));
  });

  afterEach(async () => {
    for (const sleeper of sleepers.splice(0)) await sleeper.kill();
    await rm(home, { recursive: true, force: true });
  });

  async function gatewayLike(
    args = KEEL_ARGS,
  ): Promise<{ sleeper: Sleeper; argv: string[]; startTime: number }> {
    const sleeper = await spawnSleeper(args);
    sleepers.push(sleeper);
    let argv: string[] | null = null;
    await waitFor(
      async () => {
        argv = await readProcessArgv(sleeper.pid);
        return argv?.includes("-e") === true;
      },
      { timeoutMs: 5000 },
    );
    const startTime = await readProcessStartTime(sleeper.pid);
    if (startTime === null || argv === null) throw new Error("cannot read sleeper facts");
    return { sleeper, argv, startTime };
  }

  async function writeRecord(record: unknown): Promise<void> {
    await writeFile(join(home, "gateway.pid"), JSON.stringify(record));
  }

  it("records this process's pid, real start time and argv", async () => {
    const result = await acquirePidFile(home, { argv: ["keel", "gateway", "run"], now: Date.now });
    expect(result.ok).toBe(true);
    const record = JSON.parse(await readFile(join(home, "gateway.pid"), "utf8"));
    expect(record.pid).toBe(process.pid);
    expect(record.argv).toEqual(["keel", "gateway", "run"]);
    const real = await readProcessStartTime(process.pid);
    expect(real).not.toBeNull();
    expect(Math.abs(record.start_time - (real as number))).toBeLessThanOrEqual(1000);
  });

  it("creates the home folder when it is missing", async () => {
    const nested = join(home, "a", "b");
    const result = await acquirePidFile(nested, { argv: [], now: Date.now });
    expect(result.ok).toBe(true);
    expect(await readPidFile(nested)).toMatchObject({ pid: process.pid });
  });

  it("a pid file left by a SIGKILLed gateway does not block the next start", async () => {
    const { sleeper, argv, startTime } = await gatewayLike();
    await writeRecord({ pid: sleeper.pid, start_time: startTime, argv });
    await sleeper.kill("SIGKILL");
    const result = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    expect(result.ok).toBe(true);
    expect((await readPidFile(home))?.pid).toBe(process.pid);
  });

  it("a live gateway with the recorded start time blocks the start", async () => {
    const { sleeper, argv, startTime } = await gatewayLike();
    await writeRecord({ pid: sleeper.pid, start_time: startTime, argv });
    const result = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    expect(result).toMatchObject({ ok: false, pid: sleeper.pid });
    if (!result.ok) expect(result.message).toBe(`Gateway already running (PID ${sleeper.pid}).`);
    expect((await readPidFile(home))?.pid).toBe(sleeper.pid);
  });

  it("a reused pid with a different start time does not block", async () => {
    const { sleeper, argv, startTime } = await gatewayLike();
    await writeRecord({ pid: sleeper.pid, start_time: startTime - 60_000, argv });
    const result = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    expect(result.ok).toBe(true);
  });

  it("a live process with the right start time that is not keel does not block", async () => {
    const { sleeper, startTime } = await gatewayLike(["some-other-daemon"]);
    await writeRecord({
      pid: sleeper.pid,
      start_time: startTime,
      argv: ["keel", "gateway", "run"],
    });
    const result = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    expect(result.ok).toBe(true);
  });

  it("a corrupt pid file is replaced", async () => {
    await writeFile(join(home, "gateway.pid"), "{not json");
    const result = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    expect(result.ok).toBe(true);
    expect((await readPidFile(home))?.pid).toBe(process.pid);
  });

  it("of two gateways starting at once exactly one wins", async () => {
    const other = await gatewayLike();
    for (let round = 0; round < 10; round++) {
      const [a, b] = await Promise.all([
        acquirePidFile(home, { argv: process.argv, now: Date.now }),
        acquirePidFile(home, { argv: other.argv, now: Date.now, pid: other.sleeper.pid }),
      ]);
      expect([a.ok, b.ok].filter(Boolean)).toHaveLength(1);
      const winner = a.ok ? a : b;
      if (winner.ok) await winner.release();
    }
  });

  it("two starts racing over a stale file: exactly one wins", async () => {
    const other = await gatewayLike();
    const dead = await gatewayLike();
    const deadRecord = { pid: dead.sleeper.pid, start_time: dead.startTime, argv: dead.argv };
    await dead.sleeper.kill("SIGKILL");
    for (let round = 0; round < 10; round++) {
      await writeRecord(deadRecord);
      const [a, b] = await Promise.all([
        acquirePidFile(home, { argv: process.argv, now: Date.now }),
        acquirePidFile(home, { argv: other.argv, now: Date.now, pid: other.sleeper.pid }),
      ]);
      expect([a.ok, b.ok].filter(Boolean)).toHaveLength(1);
      const winner = a.ok ? a : b;
      if (winner.ok) await winner.release();
    }
  });

  it("release removes the file only while it is still ours", async () => {
    const first = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    if (!first.ok) throw new Error("expected to acquire");
    await first.release();
    expect(await readPidFile(home)).toBeNull();

    const second = await acquirePidFile(home, { argv: KEEL_ARGS, now: Date.now });
    if (!second.ok) throw new Error("expected to acquire");
    await writeRecord({ pid: 4242, start_time: 1, argv: [] });
    await second.release();
    expect((await readPidFile(home))?.pid).toBe(4242);
  });

  it("isGatewayAlive is false for a dead pid and true for a live keel process", async () => {
    const { sleeper, argv, startTime } = await gatewayLike();
    expect(await isGatewayAlive({ pid: sleeper.pid, start_time: startTime, argv })).toBe(true);
    await sleeper.kill("SIGKILL");
    expect(await isGatewayAlive({ pid: sleeper.pid, start_time: startTime, argv })).toBe(false);
  });

  it("recognises keel command lines", () => {
    expect(
      argvLooksLikeKeel(["/usr/bin/node", "/opt/keel/bin/keel.js", "gateway", "run"], []),
    ).toBe(true);
    expect(argvLooksLikeKeel(["/usr/bin/python3", "server.py"], ["keel", "gateway", "run"])).toBe(
      false,
    );
    expect(argvLooksLikeKeel(["node", "--import", "tsx", "x.js", "a"], ["node", "x.js", "a"])).toBe(
      true,
    );
    expect(argvLooksLikeKeel(["node", "y.js", "a"], ["node", "x.js", "a"])).toBe(false);
  });
});
