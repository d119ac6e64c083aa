/**
 * The conditions the gateway alerts on, read from what it already keeps: each platform's
 * connection health, the model's run of failures, the outbox's oldest undelivered reply, the
 * sessions the restart-loop breaker holds back, and the free space on the store's volume.
 */
import { statfs } from "node:fs/promises";
import type { ModelFailing } from "../agent/model-health.js";
import type { ConnectionReport } from "../contract/platform.js";
import { maskUrlCredentials } from "../lib/url-credentials.js";
import type { Observation } from "./alert-monitor.js";

/** Below this share of the volume free, the disk alert is raised. */
export const LOW_DISK_SHARE = 0.05;

export interface GatewaySignals {
  connections(): Record<string, ConnectionReport>;
  modelFailing(): ModelFailing | null;
  /** When the oldest reply not yet delivered was queued (epoch ms), or null. */
  oldestUndelivered(): Promise<number | null>;
  /** Sessions the restart-loop breaker holds back now. */
  heldBack(): number;
  /** Free share of the volume the store lives on (0–1). */
  freeDiskShare(): Promise<number>;
}

const UNHEALTHY = new Set<ConnectionReport["state"]>(["reconnecting", "stalled", "down"]);

export async function observeGateway(signals: GatewaySignals): Promise<Observation[]> {
  const found: Observation[] = [];
  for (const [name, report] of Object.entries(signals.connections())) {
    if (UNHEALTHY.has(report.state)) {
      found.push({ alert: `platform_down:${name}`, detail: `${name} is ${report.state}` });
    }
  }
  const failing = signals.modelFailing();
  if (failing) {
    found.push({
      alert: "model_failing",
      // Another system's words, sent to a webhook and a chat: a URL's password is masked.
      detail: maskUrlCredentials(
        `every model call has failed since ${new Date(failing.since).toISOString()} (last: ${failing.model}: ${failing.error})`,
      ),
      since: failing.since,
    });
  }
  const oldest = await signals.oldestUndelivered();
  if (oldest !== null) {
    found.push({
      alert: "outbox_stuck",
      detail: `a reply queued at ${new Date(oldest).toISOString()} is not delivered yet`,
      since: oldest,
    });
  }
  const held = signals.heldBack();
  if (held > 0) {
    found.push({
      alert: "restart_loop",
      detail: `the restart-loop breaker holds back ${held} session(s) until the gateway has stayed up`,
      immediate: true,
    });
  }
  const free = await signals.freeDiskShare();
  if (free < LOW_DISK_SHARE) {
    found.push({
      alert: "disk_low",
      detail: `${(free * 100).toFixed(1)} % of the store's volume is free`,
      immediate: true,
    });
  }
  return found;
}

/** The free share of the volume holding `path` (the home: SQLite's file, or Postgres's home). */
export async function freeShareOf(path: string): Promise<number> {
  const stats = await statfs(path);
  return stats.blocks > 0 ? stats.bavail / stats.blocks : 1;
}
