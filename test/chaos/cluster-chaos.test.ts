/**
 * A short chaos run with three gateways on one Postgres database (cluster-run.ts): one of them
 * SIGKILLed at a random moment every few seconds, the poller's holder more often than not, and
 * started again. Nothing may be lost, no tool may run twice, every cut-off turn must resume.
 * The long run is `npm run chaos -- --instances 3`.
 */
import { rmSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { isBuilt } from "../helpers/gateway-process.js";
import { formatFigures } from "./chaos-run.js";
import { runClusterChaos } from "./cluster-run.js";

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: the chaos run starts bin/keel.js");
});

describe.skipIf(process.env.KEEL_TEST_PG === "skip")("chaos with three gateways", () => {
  it("loses no message, runs no tool twice, shows no answer twice and resumes every cut-off turn", async () => {
    const result = await runClusterChaos({
      turns: 80,
      seed: 3,
      instances: 3,
      timeLimitMs: 120_000,
      settleMs: 60_000,
      breakerWindowSeconds: 10,
    });
    const where = `${formatFigures(result.figures)} (history in ${result.dir})`;
    expect(result.figures.turns, where).toBe(80);
    expect(result.figures.kills, where).toBeGreaterThan(0);
    expect(result.figures.lost, where).toBe(0);
    expect(result.figures.duplicate_tool_runs, where).toBe(0);
    expect(result.figures.replies_shown_twice, where).toBe(0);
    expect(result.figures.unresumed, where).toBe(0);
    // Each kill between a send and its "delivered" mark repeats that one reply, no more.
    expect(result.figures.duplicate_replies, where).toBeLessThanOrEqual(result.figures.kills);
    rmSync(result.dir, { recursive: true, force: true });
  }, 300_000);
});
