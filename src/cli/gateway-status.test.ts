import { describe, expect, it } from "vitest";
import type { GatewayStatus } from "../control/control-surface.js";
import type { RuntimeStatus } from "../lifecycle/runtime-status.js";
import {
  buildStatusReport,
  formatDuration,
  formatStatusLines,
  type StatusReport,
} from "./gateway-status.js";

const NOW = Date.parse("2026-01-01T12:00:00Z");
const live = { pid: 4242, start_time: NOW - 90_000, argv: ["node", "keel.js"] };

function apiStatus(overrides: Partial<GatewayStatus> = {}): GatewayStatus {
  return {
    gateway_state: "running",
    pid: 4242,
    started_at: new Date(NOW - 90_000).toISOString(),
    uptime_seconds: 90,
    version: "0.1.0",
    active_turns: 2,
    draining: false,
    restart_requested: false,
    platforms: { api: { state: "connected", error: null } },
    turns: [],
    sessions: { total: 3, resume_pending: 0 },
    ...overrides,
  };
}

function fileStatus(overrides: Partial<RuntimeStatus> = {}): RuntimeStatus {
  return {
    pid: 4242,
    start_time: NOW - 90_000,
    gateway_state: "running",
    exit_reason: null,
    restart_requested: false,
    active_turns: 1,
    platforms: { telegram: { state: "error", error: "401" } },
    updated_at: new Date(NOW).toISOString(),
    ...overrides,
  };
}

const KEYS = [
  "active_turns",
  "draining",
  "gateway_state",
  "pid",
  "platforms",
  "recorded_state",
  "running",
  "source",
  "uptime_seconds",
];

describe("buildStatusReport", () => {
  it("takes everything from the API when this home's gateway answers", () => {
    const report = buildStatusReport({
      live,
      api: apiStatus({ draining: true, gateway_state: "draining" }),
      file: fileStatus(),
      drainRequested: true,
      now: NOW,
    });
    expect(report).toEqual({
      running: true,
      pid: 4242,
      gateway_state: "draining",
      uptime_seconds: 90,
      active_turns: 2,
      draining: true,
      platforms: { api: { state: "connected", error: null } },
      source: "api",
      recorded_state: "running",
    });
  });

  it("falls back to the pid file and gateway_state.json when the API is silent", () => {
    const report = buildStatusReport({
      live,
      api: null,
      file: fileStatus(),
      drainRequested: false,
      now: NOW,
    });
    expect(report).toMatchObject({
      running: true,
      pid: 4242,
      gateway_state: "running",
      uptime_seconds: 90,
      active_turns: 1,
      platforms: { telegram: { state: "error", error: "401" } },
      source: "files",
    });
  });

  it("does not show a previous process's state file as the live one's", () => {
    const report = buildStatusReport({
      live,
      api: null,
      file: fileStatus({ pid: 1111, gateway_state: "stopped", active_turns: 5 }),
      drainRequested: false,
      now: NOW,
    });
    expect(report).toMatchObject({ gateway_state: "starting", active_turns: 0, platforms: {} });
  });

  it("reports stopped, with the last recorded state, when nothing runs", () => {
    const report = buildStatusReport({
      live: null,
      api: null,
      file: fileStatus({ gateway_state: "running" }),
      drainRequested: true,
      now: NOW,
    });
    expect(report).toEqual({
      running: false,
      pid: null,
      gateway_state: "stopped",
      uptime_seconds: null,
      active_turns: 0,
      draining: true,
      platforms: {},
      source: "files",
      recorded_state: "running",
    });
  });

  it("has the same keys whatever the source (the documented JSON shape)", () => {
    const inputs = [
      { live, api: apiStatus(), file: null },
      { live, api: null, file: fileStatus() },
      { live: null, api: null, file: null },
    ];
    for (const input of inputs) {
      const report = buildStatusReport({ ...input, drainRequested: false, now: NOW });
      expect(Object.keys(report).sort()).toEqual(KEYS);
    }
  });
});

describe("formatDuration", () => {
  it("shows the largest units and drops empty ones", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(59)).toBe("59s");
    expect(formatDuration(120)).toBe("2m");
    expect(formatDuration(3723)).toBe("1h 2m 3s");
    expect(formatDuration(90_000)).toBe("1d 1h");
  });
});

describe("formatStatusLines", () => {
  const running: StatusReport = {
    running: true,
    pid: 7,
    gateway_state: "running",
    uptime_seconds: 65,
    active_turns: 1,
    draining: false,
    platforms: {
      api: { state: "connected", error: null },
      telegram: { state: "error", error: "401" },
    },
    source: "api",
    recorded_state: "running",
  };

  it("names state, pid, uptime, address, turns and platforms", () => {
    expect(formatStatusLines(running, "http://127.0.0.1:8642")).toEqual([
      "Gateway: running (pid 7, up 1m 5s)",
      "Address: http://127.0.0.1:8642",
      "Active turns: 1",
      "Platforms: api connected, telegram error (401)",
    ]);
  });

  it("gives each platform's last event age where the gateway knows it", () => {
    const report: StatusReport = {
      ...running,
      platforms: {
        telegram: { state: "stalled", error: null, last_event_age_s: 125 },
        slack: { state: "reconnecting", error: "no pong", last_event_age_s: null },
      },
    };
    expect(formatStatusLines(report, "http://127.0.0.1:8642").at(-1)).toBe(
      "Platforms: telegram stalled, last event 2m 5s ago, slack reconnecting (no pong)",
    );
  });

  it("lists the gateways sharing the store, alive or dead, and marks this one", () => {
    const instance = {
      host: "h1",
      pid: 11,
      started_at: "2026-01-01T11:00:00.000Z",
      heartbeat_at: "2026-01-01T11:59:59.000Z",
      heartbeat_age_seconds: 1,
      alive: true,
      self: true,
      sessions: ["api:a"],
    };
    const lines = formatStatusLines(
      {
        ...running,
        instances: [
          { ...instance, id: "gw-a" },
          {
            ...instance,
            id: "gw-b",
            host: "h2",
            alive: false,
            self: false,
            heartbeat_age_seconds: 95,
            sessions: [],
          },
        ],
      },
      "http://x",
    );
    expect(lines.slice(-2)).toEqual([
      "Instance gw-a (this one): alive, h1 pid 11, started 2026-01-01T11:00:00.000Z, last heartbeat 2026-01-01T11:59:59.000Z, 1 session(s) held",
      "Instance gw-b: DEAD (no heartbeat for 1m 35s), h2 pid 11, started 2026-01-01T11:00:00.000Z, last heartbeat 2026-01-01T11:59:59.000Z, 0 session(s) held",
    ]);
  });

  it("not running: still lists the gateways sharing the store (read from it)", () => {
    const report = buildStatusReport({
      live: null,
      api: null,
      file: null,
      drainRequested: false,
      now: NOW,
      storeInstances: [
        {
          id: "gw-b",
          host: "h2",
          pid: 22,
          started_at: "2026-01-01T11:00:00.000Z",
          heartbeat_at: "2026-01-01T11:59:59.000Z",
          heartbeat_age_seconds: 1,
          alive: true,
          self: false,
          sessions: [],
        },
      ],
    });
    expect(report.instances?.map((i) => i.id)).toEqual(["gw-b"]);
    const lines = formatStatusLines(report, "http://x");
    expect(lines[0]).toBe("Gateway: not running");
    expect(lines.at(-1)).toMatch(/^Instance gw-b: alive, h2 pid 22/);
  });

  it("says when it is drained and when the API did not answer", () => {
    const lines = formatStatusLines({ ...running, draining: true, source: "files" }, "http://x");
    expect(lines.some((l) => l.startsWith("Draining: yes"))).toBe(true);
    expect(lines.at(-1)).toContain("this gateway's control API did not answer at");
  });

  it("explains a stop that was not planned", () => {
    const lines = formatStatusLines(
      {
        ...running,
        running: false,
        pid: null,
        gateway_state: "stopped",
        uptime_seconds: null,
        platforms: {},
        source: "files",
        recorded_state: "running",
        draining: true,
      },
      "http://x",
    );
    expect(lines[0]).toBe("Gateway: not running");
    expect(lines[1]).toContain("Last recorded state: running");
    expect(lines[1]).toContain("keel gateway stop");
    expect(lines[2]).toContain("next start begins drained");
  });
});
