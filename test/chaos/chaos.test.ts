/**
 * A short chaos run in the test suite: a hundred turns, every named crash point once, random
 * kills in between, the real gateway process. The long run is `npm run chaos -- --turns 1000`.
 */
import { rmSync } from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { CRASH_POINTS } from "../../src/lib/crash-point.js";
import { isBuilt } from "../helpers/gateway-process.js";
import { type ChaosResult, formatFigures, runChaos } from "./chaos-run.js";

let result: ChaosResult | null = null;

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: the chaos run starts bin/keel.js");
});

afterEach(() => {
  // Kept for a failing run: the error message names the folder.
  if (result?.ok) rmSync(result.dir, { recursive: true, force: true });
  result = null;
});

describe("chaos (short run)", () => {
  it("loses no message, runs no tool twice and resumes every interrupted session", async () => {
    result = await runChaos({ turns: 100, seed: 5, timeLimitMs: 60_000, settleMs: 20_000 });
    const figures = formatFigures(result.figures);
    const where = `${figures} (history in ${result.dir})`;
    expect(Object.keys(result.crashPointsHit).sort(), where).toEqual([...CRASH_POINTS].sort());
    expect(result.figures.turns, where).toBe(100);
    expect(result.figures.kills, where).toBeGreaterThanOrEqual(CRASH_POINTS.length);
    expect(result.figures.lost, where).toBe(0);
    expect(result.figures.duplicate_tool_runs, where).toBe(0);
    expect(result.figures.unresumed, where).toBe(0);
    // Each kill between a send and its "delivered" mark repeats that one reply, no more.
    expect(result.figures.duplicate_replies, where).toBeLessThanOrEqual(result.figures.kills);
  }, 120_000);
});
