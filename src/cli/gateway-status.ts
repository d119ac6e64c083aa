/**
 * `keel gateway status [--json]`: what the gateway of this home folder is doing, from the control
 * API when it answers and from `gateway.pid` + `gateway_state.json` otherwise. Exit 0 when it
 * runs, 3 when it does not (as `systemctl status` and LSB init scripts do).
 */

import type { Config } from "../config/schema.js";
import { storeTarget } from "../config/store-target.js";
import type { GatewayStatus } from "../control/control-surface.js";
import { type BackupState, readBackupState } from "../data/data-jobs.js";
import { describeInstances } from "../gateway/instance-registry.js";
import { maskUrlCredentials } from "../lib/url-credentials.js";
import { readDrainRequest } from "../lifecycle/markers.js";
import type { PidRecord } from "../lifecycle/pid-file.js";
import { type RuntimeStatus, readRuntimeStatus } from "../lifecycle/runtime-status.js";
import { runServiceStatusCommand } from "../service/service-commands.js";
import { openCommandStore } from "../sessions/open-store.js";
import { buildServiceSpec } from "./gateway-install.js";
import {
  type ControlTarget,
  fetchOwnApiStatus,
  gatewayBaseUrl,
  liveGateway,
} from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForControl } from "./load.js";
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
  /** From the API: each platform's connection health and `last_event_age_s` (GatewayStatus). */
  platforms: GatewayStatus["platforms"];
  source: "api" | "files";
  /** What `gateway_state.json` last recorded (e.g. `running` after a crash), or null. */
  recorded_state: string | null;
  /**
   * With a store shared by several gateways (Postgres): every one of them, from the API, or read
   * from the store when this home's gateway does not answer.
   */
  instances?: NonNullable<GatewayStatus["instances"]>;
  /** The last scheduled backup (`backup.every`): when, whether it was written and verified. */
  last_backup?: BackupState;
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
  /** The gateways sharing the store, read from it (used when the API did not answer). */
  storeInstances?: NonNullable<GatewayStatus["instances"]>;
}

/** Combines what is known into the report. Pure. */
export function buildStatusReport(inputs: StatusInputs): StatusReport {
  const { live, api, file, now } = inputs;
  const recorded = file?.gateway_state ?? null;
  const fromStore = inputs.storeInstances && { instances: inputs.storeInstances };
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
      ...(api.instances && { instances: api.instances }),
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
      ...fromStore,
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
    ...fromStore,
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
    for (const i of report.instances ?? []) lines.push(instanceLine(i));
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
    ([name, p]) =>
      `${name} ${p.state}${heardLine(p.last_event_age_s)}${p.error ? ` (${p.error})` : ""}`,
  );
  if (platforms.length > 0) lines.push(`Platforms: ${platforms.join(", ")}`);
  for (const i of report.instances ?? []) lines.push(instanceLine(i));
  if (report.source === "files") {
    lines.push(
      `(this gateway's control API did not answer at ${baseUrl} (starting, stopping, or another program holds the address): read from gateway.pid and gateway_state.json)`,
    );
  }
  return lines;
}

/** ", last event 5s ago" where the gateway knows when the platform last spoke. */
function heardLine(ageSeconds: number | null | undefined): string {
  return typeof ageSeconds === "number" ? `, last event ${formatDuration(ageSeconds)} ago` : "";
}

type InstanceStatus = NonNullable<StatusReport["instances"]>[number];

/** One gateway sharing the store: alive or dead, since when it is silent, what it holds. */
function instanceLine(i: InstanceStatus): string {
  const state = i.alive
    ? "alive"
    : `DEAD (no heartbeat for ${formatDuration(i.heartbeat_age_seconds)})`;
  return `Instance ${i.id}${i.self ? " (this one)" : ""}: ${state}, ${i.host} pid ${i.pid}, started ${i.started_at}, last heartbeat ${i.heartbeat_at}, ${i.sessions.length} session(s) held`;
}

/** Gathers the status of the gateway of `home`. */
export async function readStatusReport(
  config: ControlTarget & Pick<Config, "home" | "store" | "cluster">,
): Promise<StatusReport> {
  const live = await liveGateway(config.home);
  const [api, file, drain] = await Promise.all([
    fetchOwnApiStatus(config, live),
    readRuntimeStatus(config.home),
    readDrainRequest(config.home).catch(() => null),
  ]);
  const storeInstances = api ? undefined : await instancesFromStore(config);
  return buildStatusReport({
    live,
    api,
    file,
    drainRequested: drain !== null,
    now: Date.now(),
    ...(storeInstances && { storeInstances }),
  });
}

/**
 * This home's gateway did not answer, but on a shared store the others may run: they are read
 * from the store (undefined on SQLite, or when the store cannot be opened).
 */
async function instancesFromStore(
  config: Pick<Config, "home" | "store" | "cluster">,
): Promise<StatusReport["instances"]> {
  const target = storeTarget(config);
  if (target.kind !== "postgres") return undefined;
  const store = await openCommandStore(target).catch(() => null);
  if (!store) return undefined;
  try {
    const self = {
      instanceId: config.cluster.instance_id ?? "",
      leaseTtlMs: config.cluster.lease_ttl * 1000,
    };
    return await describeInstances(store, self, Date.now());
  } catch {
    return undefined;
  } finally {
    await store.close();
  }
}

export async function gatewayStatus(
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  const { config } = await loadForControl(options, io);
  const report = await readStatusReport(config);
  const backup = readBackupState(config.home);
  if (backup) report.last_backup = backup;
  // Platform errors are other systems' words: a URL with a password in them is masked.
  if (options.json) {
    io.out(maskUrlCredentials(JSON.stringify(report)));
  } else {
    for (const line of formatStatusLines(report, gatewayBaseUrl(config.http))) {
      io.out(maskUrlCredentials(line));
    }
    if (backup) {
      io.out(
        backup.ok
          ? `Last backup: ${backup.at}, ${backup.path} (${Math.round((backup.bytes ?? 0) / 1024)} KiB, verified)`
          : `Last backup: ${backup.at} FAILED: ${backup.error}`,
      );
    }
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
