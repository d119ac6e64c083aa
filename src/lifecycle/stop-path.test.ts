import pino from "pino";
import { describe, expect, it } from "vitest";
import { STOP_STEPS, StopPath } from "./stop-path.js";

const logger = pino({ level: "silent" });

describe("StopPath", () => {
  it("runs the armed steps in the named order whatever order they were armed in", async () => {
    const ran: string[] = [];
    const path = new StopPath<string>();
    // Armed as start-up brings the parts up: the pid file first, the watchers last.
    for (const step of [...STOP_STEPS].reverse()) path.arm(step, () => ran.push(step));
    await path.run("stop", logger);
    expect(ran).toEqual([...STOP_STEPS]);
  });

  it("after a failed start, closes only what had started, and passes the reason", async () => {
    const ran: string[] = [];
    const path = new StopPath<string | null>();
    path.arm("release pid file", (reason) => ran.push(`pid:${reason}`));
    path.arm("close store", (reason) => ran.push(`store:${reason}`));
    path.arm("close HTTP server", (reason) => ran.push(`http:${reason}`));
    await path.run(null, logger);
    expect(ran).toEqual(["http:null", "store:null", "pid:null"]);
  });

  it("a failing step does not keep the later ones from running, and each runs once", async () => {
    const ran: string[] = [];
    const path = new StopPath<null>();
    path.arm("close HTTP server", () => {
      throw new Error("boom");
    });
    path.arm("close store", async () => {
      ran.push("store");
    });
    await path.run(null, logger);
    await path.run(null, logger);
    expect(ran).toEqual(["store"]);
    expect(path.pending()).toEqual([]);
  });
});
