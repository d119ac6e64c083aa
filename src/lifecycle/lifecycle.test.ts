import { describe, expect, it } from "vitest";
import { type GatewayState, Lifecycle, reportedState } from "./lifecycle.js";

/** A lifecycle brought to `state` through allowed moves only. */
function at(state: GatewayState): Lifecycle {
  const life = new Lifecycle(null, () => 5);
  const path: Record<GatewayState, GatewayState[]> = {
    starting: [],
    running: ["running"],
    draining: ["running", "draining"],
    stopping: ["stopping"],
    stopped: ["stopping", "stopped"],
    failed: ["failed"],
  };
  for (const next of path[state]) expect(life.moveTo(next)).toBe(true);
  expect(life.state()).toBe(state);
  return life;
}

const STATES: GatewayState[] = ["starting", "running", "draining", "stopping", "stopped", "failed"];

describe("gateway lifecycle states", () => {
  // Every pair (from, to): whether the move exists. A stop never turns back; a drain does.
  const allowed: Record<GatewayState, GatewayState[]> = {
    starting: ["running", "stopping", "failed"],
    running: ["draining", "stopping"],
    draining: ["running", "stopping"],
    stopping: ["stopped"],
    stopped: [],
    failed: [],
  };
  for (const from of STATES) {
    for (const to of STATES) {
      const ok = allowed[from].includes(to);
      it(`${from} → ${to}: ${ok ? "moves" : "refused, state kept"}`, () => {
        const life = at(from);
        expect(life.moveTo(to)).toBe(ok);
        expect(life.state()).toBe(ok ? to : from);
      });
    }
  }

  it("only running is the lifecycle's half of ready", () => {
    expect(STATES.filter((s) => at(s).isRunning())).toEqual(["running"]);
  });

  it("shows a stop under way as draining and a failed start as startup_failed", () => {
    expect(STATES.map(reportedState)).toEqual([
      "starting",
      "running",
      "draining",
      "draining",
      "stopped",
      "startup_failed",
    ]);
  });

  it("tells the status listeners of each move, and only of real ones", () => {
    const life = new Lifecycle(null);
    let changes = 0;
    life.onStatusChange(() => (changes += 1));
    life.moveTo("running");
    life.moveTo("running");
    life.moveTo("draining");
    expect(changes).toBe(2);
  });
});

describe("stop requests", () => {
  it("honours the first request only, plans its exit once and tells the listeners once", async () => {
    const life = new Lifecycle("launchd", () => 77);
    const heard: boolean[] = [];
    life.onStopRequested((request) => heard.push(request.restart));
    expect(life.requestStop({ restart: true, signalInitiated: false }).accepted).toBe(true);
    expect(life.requestStop({ restart: false, signalInitiated: true }).accepted).toBe(false);
    expect(heard).toEqual([true]);
    expect(life.stopRequest()).toMatchObject({ restart: true, viaService: true, detached: false });
    expect(life.stopPlan()).toMatchObject({
      exitCode: 75,
      restartPending: { requested_at: 77, via_service: true, detached: false },
    });
    expect(await life.whenStopAsked()).toMatchObject({ restart: true });
  });

  it("outside a supervisor a restart is detached", () => {
    const life = new Lifecycle(null);
    life.requestStop({ restart: true, signalInitiated: false });
    expect(life.stopRequest()).toMatchObject({ viaService: false, detached: true });
    expect(life.stopPlan()?.launchDetachedSuccessor).toBe(true);
  });

  it("exits with the stop pass's code once stopped", async () => {
    const life = at("stopping");
    life.finish(75);
    life.finish(0);
    expect(life.state()).toBe("stopped");
    expect(await life.exited).toBe(75);
  });

  it("a failed start exits 1, whatever stop was asked for while starting", async () => {
    const life = new Lifecycle(null);
    life.requestStop({ restart: false, signalInitiated: false });
    life.fail();
    expect(life.state()).toBe("failed");
    expect(await life.exited).toBe(1);
  });
});
