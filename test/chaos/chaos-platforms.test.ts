/**
 * Short chaos runs on WhatsApp and Matrix (issue 38): the single-gateway run of chaos.test.ts with
 * the users on the platform's stand-in (the Cloud API webhook sender and Graph API; the
 * homeserver's /sync and room sends), the gateway SIGKILLed at random moments and at crash points
 * and started again. Nothing may be lost, no tool may run twice, no answer may be shown twice,
 * every cut-off turn must resume. Short on purpose (the suite runs it on every submission); the
 * long runs are `npm run chaos -- --platform whatsapp --turns 200` (and matrix). Like
 * chaos.test.ts, it shortens only the restart-loop breaker's window (10 s).
 */
import { rmSync } from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import { isBuilt } from "../helpers/gateway-process.js";
import { formatFigures, runChaos } from "./chaos-run.js";

beforeAll(() => {
  if (!isBuilt()) throw new Error("run `npm run build` first: the chaos run starts bin/keel.js");
});

describe.each(["whatsapp", "matrix"] as const)("chaos on %s (short run)", (platform) => {
  it("loses no message, runs no tool twice, shows no answer twice and resumes every cut-off turn", async () => {
    const result = await runChaos({
      turns: 36,
      seed: 4,
      platform,
      timeLimitMs: 90_000,
      settleMs: 40_000,
      breakerWindowSeconds: 10,
    });
    const where = `${platform}: ${formatFigures(result.figures)} (history in ${result.dir})`;
    expect(result.figures.turns, where).toBe(36);
    expect(result.figures.kills, where).toBeGreaterThan(1);
    expect(result.figures.lost, where).toBe(0);
    expect(result.figures.duplicate_tool_runs, where).toBe(0);
    expect(result.figures.replies_shown_twice, where).toBe(0);
    expect(result.figures.unresumed, where).toBe(0);
    // Each kill between a send and its "delivered" mark repeats that one reply, no more.
    expect(result.figures.duplicate_replies, where).toBeLessThanOrEqual(result.figures.kills);
    rmSync(result.dir, { recursive: true, force: true });
  }, 300_000);
});
