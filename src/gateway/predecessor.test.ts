import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { readProcessStartTime } from "../lifecycle/process-info.js";
import {
  currentIdentity,
  type InstanceIdentity,
  PREDECESSOR_FILE,
  provenDead,
  readPredecessor,
  recordIdentity,
} from "./predecessor.js";

let child: ChildProcess | null = null;
afterEach(() => {
  child?.kill("SIGKILL");
  child = null;
});

/** A real process standing for the previous gateway, and the record it would have left. */
async function predecessorProcess(): Promise<InstanceIdentity> {
  child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
  const pid = child.pid!;
  const self = await currentIdentity("now");
  return {
    ...self,
    id: "before",
    pid,
    processStart: await readProcessStartTime(pid),
  };
}

describe.skipIf(process.platform !== "linux")("this home's previous gateway", () => {
  it("is proven gone only when its process is: not while it runs, yes once it was killed", async () => {
    const self = await currentIdentity("now");
    const before = await predecessorProcess();
    expect(await provenDead(before, self)).toBeNull();
    const exited = new Promise((resolve) => child!.once("exit", resolve));
    child!.kill("SIGKILL");
    await exited;
    expect(await provenDead(before, self)).toBe("process_gone");
  });

  it("is proven gone when its pid now names a process that started at another time", async () => {
    const self = await currentIdentity("now");
    const before = await predecessorProcess();
    const reused = { ...before, processStart: before.processStart! - 3_600_000 };
    expect(await provenDead(reused, self)).toBe("pid_reused");
    // A container's gateway often has the same pid at every start: its own pid is no proof of life.
    const samePid = { ...self, id: "before", processStart: self.processStart! - 3_600_000 };
    expect(await provenDead(samePid, self)).toBe("pid_reused");
    // Without a start time to compare, a live pid proves nothing: the lease TTL stands.
    expect(await provenDead({ ...before, processStart: null }, self)).toBeNull();
  });

  it("is proven gone after a reboot, and never from another host", async () => {
    const self = await currentIdentity("now");
    const before = await predecessorProcess();
    expect(await provenDead({ ...before, bootId: "another-boot" }, self)).toBe("rebooted");
    child!.kill("SIGKILL");
    expect(await provenDead({ ...before, host: "elsewhere", pid: 9_999_999 }, self)).toBeNull();
  });

  it("is read back from the home as recorded; an unreadable record names nobody", async () => {
    const home = createTempDir();
    try {
      expect(await readPredecessor(home.path)).toBeNull();
      const self = await currentIdentity("gw-1");
      await recordIdentity(home.path, self);
      expect(await readPredecessor(home.path)).toEqual(self);
      writeFileSync(join(home.path, PREDECESSOR_FILE), "{ not json");
      expect(await readPredecessor(home.path)).toBeNull();
    } finally {
      home.cleanup();
    }
  });
});
