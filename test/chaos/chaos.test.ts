/**
 * Short chaos runs in the test suite: a hundred turns each, random kills, named crash points and
 * a crash loop (five starts each killed within 2 s) in between, the real gateway process. Which
 * crash points a run reaches depends on timing (a point needs traffic while its gateway lives),
 * so runs with further seeds follow, at most four in all, each aiming first at the points not
 * hit yet, until every point has been hit at least once. Each run must lose nothing, run no tool twice and leave no session unresumed.
 *
 * Everything is the shipped default except the restart-loop breaker's window, shortened from
 * 60 s to 10 s (a user setting) so that waiting for a stable gateway keeps the suite short. The
 * long runs on the shipped defaults are `npm run chaos -- --turns 1000`.
 */
import { rmSync } from "node:fs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { CRASH_POINTS } from "../../src/lib/crash-point.js";
import { isBuilt } from "../helpers/gateway-process.js";
import { type ChaosResult, formatFigures, runChaos } from "./chaos-run.js";

const SEEDS = [5, 1, 7, 11];
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
  it("loses no message, runs no tool twice, shows no answer twice and resumes every interrupted session, at every crash point", async () => {
    const hit = new Set<string>();
    let trips = 0;
    let heldResumes = 0;
    for (const seed of SEEDS) {
      // After the first run, the next aims its first round at the points not hit yet.
      const missing = CRASH_POINTS.filter((point) => !hit.has(point));
      const result = await runChaos({
        turns: 150,
        seed,
        ...(hit.size > 0 && { crashPoints: missing }),
        timeLimitMs: 120_000,
        settleMs: 40_000,
        breakerWindowSeconds: 10,
      });
      results.push(result);
      const where = `seed ${seed}: ${formatFigures(result.figures)} (history in ${result.dir})`;
      expect(result.figures.turns, where).toBe(150);
      expect(result.figures.lost, where).toBe(0);
      expect(result.figures.duplicate_tool_runs, where).toBe(0);
      expect(result.figures.replies_shown_twice, where).toBe(0);
      expect(result.figures.unresumed, where).toBe(0);
      // Each kill between a send and its "delivered" mark repeats that one reply, no more.
      expect(result.figures.duplicate_replies, where).toBeLessThanOrEqual(result.figures.kills);
      trips += result.figures.breaker_trips;
      heldResumes += result.figures.held_resumes;
      for (const point of Object.keys(result.crashPointsHit)) hit.add(point);
      if (hit.size === CRASH_POINTS.length) break;
    }
    expect([...hit].sort(), "crash points hit").toEqual([...CRASH_POINTS].sort());
    // Held back, never dropped: a crash loop trips the breaker, and what it held back resumed
    // once a gateway had stayed up for the window (the figures above: nothing lost).
    expect(trips).toBeGreaterThan(0);
    expect(heldResumes).toBeGreaterThan(0);
  }, 600_000);
});
