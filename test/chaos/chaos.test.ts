/**
 * Short chaos runs in the test suite: a hundred turns each, random kills and named crash points
 * in between, the real gateway process. Which crash points a run reaches depends on timing (a
 * point needs traffic while its gateway lives), so runs with further seeds follow, at most three
 * in all, until every point has been hit at least once. Each run must lose nothing, run no tool
 * twice and leave no session unresumed. The long run is `npm run chaos -- --turns 1000`.
 */
import { rmSync } from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { CRASH_POINTS } from "../../src/lib/crash-point.js";
import { isBuilt } from "../helpers/gateway-process.js";
import { type ChaosResult, formatFigures, runChaos } from "./chaos-run.js";

const SEEDS = [5, 1, 7];
const results: ChaosResult[] = [];

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: the chaos run starts bin/keel.js");
});

afterEach(() => {
  // Kept for a failing run: the error message names the folder.
  for (const result of results.splice(0)) {
    if (result.ok) rmSync(result.dir, { recursive: true, force: true });
  }
});

describe("chaos (short runs)", () => {
  it("loses no message, runs no tool twice and resumes every interrupted session, at every crash point", async () => {
    const hit = new Set<string>();
    for (const seed of SEEDS) {
      const result = await runChaos({ turns: 100, seed, timeLimitMs: 60_000, settleMs: 20_000 });
      results.push(result);
      const where = `seed ${seed}: ${formatFigures(result.figures)} (history in ${result.dir})`;
      expect(result.figures.turns, where).toBe(100);
      expect(result.figures.lost, where).toBe(0);
      expect(result.figures.duplicate_tool_runs, where).toBe(0);
      expect(result.figures.unresumed, where).toBe(0);
      // Each kill between a send and its "delivered" mark repeats that one reply, no more.
      expect(result.figures.duplicate_replies, where).toBeLessThanOrEqual(result.figures.kills);
      for (const point of Object.keys(result.crashPointsHit)) hit.add(point);
      if (hit.size === CRASH_POINTS.length) break;
    }
    expect([...hit].sort()).toEqual([...CRASH_POINTS].sort());
  }, 300_000);
});
