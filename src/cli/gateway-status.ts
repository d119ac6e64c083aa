/**
 * `keel gateway status [--json]`: what the gateway of this home folder is doing, from the control
 * API when it answers and from `gateway.pid` + `gateway_state.json` otherwise. Exit 0 when it
 * runs, 3 when it does not (as `systemctl status` and LSB init scripts do).
 */
import type { GatewayStatus } from "../control/control-surface.js";
import { readDrainRequest } from "../gateway/markers.js";
import type { PidRecord } from "../gateway/pid-file.js";
import { type RuntimeStatus, readRuntimeStatus } from "../gateway/runtime-status.js";
import { runServiceStatusCommand } from "../service/service-commands.js";
import { buildServiceSpec } from "./gateway-install.js";
import {
  type ControlTarget,
  fetchOwnApiStatus,
  gatewayBaseUrl,
  liveGateway,
} from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";
import { findServiceTarget, machineServiceDeps } from "./service-target.js";

/** Exit code of `status` when no gateway runs (LSB "program is not running"). */
export const EXIT_NOT_RUNNING = 3;

/** The stable machine-readable shape of `keel gateway status --json` (docs/operations.md). */
export interface StatusReport {
  running: boolean;
  pid: number | null;
  /** `starting`, `running`, `draining`, `stopped`, `startup_failed`; `stopped` whenever not running. */
  gateway_state: string;
  uptime_seconds: number | null;
  active_turns: number;
  /** An external drain is in effect (running) or requested for the next start (not running). */
  draining: boolean;
  platforms: Record<string, { state: string; error: string | null }>;
  source: "api" | "files";
  /** What `gateway_state.json` last recorded (e.g. `running` after a crash), or null. */
  recorded_state: string | null;
}

/** What {@link buildStatusReport} combines. */
export interface StatusInputs {
  /** The live gateway's pid record, or null when none runs. */
  live: PidRecord | null;
  /** `/api/status` of this home's gateway, or null when it did not answer. */
  api: GatewayStatus | null;
  /** `gateway_state.json`, or null. */
  file: RuntimeStatus | null;
  /** `.drain_request.json` is present. */
  drainRequested: boolean;
  now: number;
}

/** Combines what is known into the report. Pure. */
export function buildStatusReport(inputs: StatusInputs): StatusReport {
  const { live, api, file, now } = inputs;
  const recorded = file?.gateway_state ?? null;
  if (live !== null && api !== null) {
    return {
      running: true,
      pid: api.pid,
      gateway_state: api.gateway_state,
      uptime_seconds: api.uptime_seconds,
      active_turns: api.active_turns,
      draining: api.draining,
      platforms: api.platforms,
      source: "api",
      recorded_state: recorded,
    };
  }
  if (live !== null) {
    // The file may still describe the previous process until the new one writes it.
    const own = file !== null && file.pid === live.pid ? file : null;
    return {
      running: true,
      pid: live.pid,
      gateway_state: own?.gateway_state ?? "starting",
      uptime_seconds: Math.max(0, Math.round((now - live.start_time) / 1000)),
      active_turns: own?.active_turns ?? 0,
      draining: inputs.drainRequested,
      platforms: own?.platforms ?? {},
      source: "files",
      recorded_state: recorded,
    };
  }
  return {
    running: false,
    pid: null,
    gateway_state: "stopped",
    uptime_seconds: null,
    active_turns: 0,
    draining: inputs.drainRequested,
    platforms: {},
    source: "files",
    recorded_state: recorded,
  };
}

/** `1h 2m 3s` style. Pure. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const parts: string[] = [];
  const days = Math.floor(s / 86_400);
  const hours = Math.floor((s % 86_400) / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  if (days > 0) parts.push(`${days}d`);
  if (hours > 0) parts.push(`${hours}h`);
  if (minutes > 0) parts.push(`${minutes}m`);
  if (parts.length === 0 || s % 60 > 0) parts.push(`${s % 60}s`);
  return parts.join(" ");
}

/** The human-readable lines of `keel gateway status`. Pure. */
export function formatStatusLines(report: StatusReport, baseUrl: string): string[] {
  if (!report.running) {
    const lines = ["Gateway: not running"];
    if (report.recorded_state === "running" || report.recorded_state === "draining") {
      lines.push(
        `Last recorded state: ${report.recorded_state} (it did not stop through \`keel gateway stop\`: killed, crashed or an unannounced SIGTERM)`,
      );
    } else if (report.recorded_state !== null) {
      lines.push(`Last recorded state: ${report.recorded_state}`);
    }
    if (report.draining) lines.push("Drain requested: the next start begins drained.");
    return lines;
  }
  const uptime =
    report.uptime_seconds === null ? "" : `, up ${formatDuration(report.uptime_seconds)}`;
  const lines = [
    `Gateway: ${report.gateway_state} (pid ${report.pid}${uptime})`,
    `Address: ${baseUrl}`,
    `Active turns: ${report.active_turns}`,
  ];
  if (report.draining) {
    lines.push(
      "Draining: yes (new turns are refused; `keel gateway drain --cancel` accepts them again)",
    );
  }
  const platforms = Object.entries(report.platforms).map(
    ([name, p]) => `${name} ${p.state}${p.error ? ` (${p.error})` : ""}`,
  );
  if (platforms.length > 0) lines.push(`Platforms: ${platforms.join(", ")}`);
  if (report.source === "files") {
    lines.push("(the control API did not answer: read from gateway.pid and gateway_state.json)");
  }
  return lines;
}

/** Gathers the status of the gateway of `home`. */
export async function readStatusReport(
  config: ControlTarget & { home: string },
): Promise<StatusReport> {
  const live = await liveGateway(config.home);
  const [api, file, drain] = await Promise.all([
    fetchOwnApiStatus(config, live),
    readRuntimeStatus(config.home),
    readDrainRequest(config.home).catch(() => null),
  ]);
  return buildStatusReport({ live, api, file, drainRequested: drain !== null, now: Date.now() });
}

export async function gatewayStatus(
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  const report = await readStatusReport(config);
  if (options.json) {
    io.out(JSON.stringify(report));
  } else {
    for (const line of formatStatusLines(report, gatewayBaseUrl(config.http))) io.out(line);
    await printServiceLine(config, io);
  }
  return report.running ? EXIT.ok : EXIT_NOT_RUNNING;
}

async function printServiceLine(
  config: Parameters<typeof buildServiceSpec>[0],
  io: CliIo,
): Promise<void> {
  const deps = machineServiceDeps();
  const target = await findServiceTarget(config.home, deps);
  const system = target?.system ?? false;
  let spec: ReturnType<typeof buildServiceSpec>["spec"] | undefined;
  try {
    spec = buildServiceSpec(config, io.env, { system }).spec;
  } catch {
    spec = undefined;
  }
  await runServiceStatusCommand(
    {
      system,
      drainTimeoutSeconds: config.agent.restart_drain_timeout,
      ...(spec !== undefined && { spec }),
    },
    io,
    deps,
  );
}
