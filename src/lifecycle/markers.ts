/**
 * The small marker files in the home folder that carry intent across a stop and the next
 * start. All writes are atomic and create the folder when missing; all reads treat a missing
 * folder like a missing file.
 */
import { join } from "node:path";
import {
  asRecord,
  readJsonFile,
  removeFile,
  writeFileAtomic,
  writeJsonAtomic,
} from "../lib/atomic-file.js";

export const CLEAN_SHUTDOWN_FILE = ".clean_shutdown";
export const RESTART_NOTIFY_FILE = ".restart_notify.json";
export const RESTART_PENDING_FILE = ".restart_pending.json";
export const PLANNED_STOP_FILE = ".planned_stop.json";
export const DRAIN_REQUEST_FILE = ".drain_request.json";

/** A planned-stop marker older than this is a leftover and never matches. */
export const PLANNED_STOP_MAX_AGE_MS = 60_000;

/** Where to say "restarted" after a chat `/restart`. */
export interface RestartNotify {
  platform: string;
  chat_id: string;
  thread_id: string | null;
  /** The `/restart` message; the greeting answers it. */
  message_id: string | null;
  /** Epoch milliseconds. */
  requested_at: number;
}

/** A restart not asked from a chat: the next start greets the home channels. */
export interface RestartPending {
  requested_at: number;
  via_service: boolean;
  detached: boolean;
}

/** Written by `keel gateway stop` before it signals: the stop of that process is planned. */
export interface PlannedStop {
  target_pid: number;
  target_start_time: number | null;
  written_at: number | null;
}

export type PlannedStopRead =
  | { kind: "missing" }
  | { kind: "corrupt" }
  | { kind: "ok"; marker: PlannedStop };

/** The body of `.drain_request.json`; a corrupt file reads as present with an empty body. */
export type DrainRequest = Record<string, unknown>;

/** Marks the last stop as clean (no turn was cut off). */
export async function writeCleanShutdown(home: string, now: number): Promise<void> {
  await writeFileAtomic(join(home, CLEAN_SHUTDOWN_FILE), `${new Date(now).toISOString()}\n`);
}

/** Removes `.clean_shutdown`; true when it was there (the previous stop was clean). */
export async function consumeCleanShutdown(home: string): Promise<boolean> {
  return removeFile(join(home, CLEAN_SHUTDOWN_FILE));
}

export async function writeRestartNotify(home: string, notify: RestartNotify): Promise<void> {
  await writeJsonAtomic(join(home, RESTART_NOTIFY_FILE), notify);
}

/** Reads and removes `.restart_notify.json`; null when missing or malformed (removed too). */
export async function consumeRestartNotify(home: string): Promise<RestartNotify | null> {
  const path = join(home, RESTART_NOTIFY_FILE);
  const read = await readJsonFile(path);
  await removeFile(path);
  const record = read.kind === "ok" ? asRecord(read.value) : null;
  if (
    record === null ||
    typeof record.platform !== "string" ||
    typeof record.chat_id !== "string"
  ) {
    return null;
  }
  return {
    platform: record.platform,
    chat_id: record.chat_id,
    thread_id: typeof record.thread_id === "string" ? record.thread_id : null,
    message_id: typeof record.message_id === "string" ? record.message_id : null,
    requested_at: typeof record.requested_at === "number" ? record.requested_at : 0,
  };
}

export async function writeRestartPending(home: string, pending: RestartPending): Promise<void> {
  await writeJsonAtomic(join(home, RESTART_PENDING_FILE), pending);
}

/** Reads and removes `.restart_pending.json`; null when missing. A malformed file still counts. */
export async function consumeRestartPending(home: string): Promise<RestartPending | null> {
  const path = join(home, RESTART_PENDING_FILE);
  const read = await readJsonFile(path);
  if (read.kind === "missing") return null;
  await removeFile(path);
  const record = read.kind === "ok" ? asRecord(read.value) : null;
  return {
    requested_at: typeof record?.requested_at === "number" ? record.requested_at : 0,
    via_service: record?.via_service === true,
    detached: record?.detached === true,
  };
}

/** Used by the CLI before it signals the gateway. */
export async function writePlannedStop(
  home: string,
  target: { pid: number; startTime: number | null; now: number },
): Promise<void> {
  const marker: PlannedStop = {
    target_pid: target.pid,
    target_start_time: target.startTime,
    written_at: target.now,
  };
  await writeJsonAtomic(join(home, PLANNED_STOP_FILE), marker);
}

/** Reads `.planned_stop.json` without removing it. */
export async function readPlannedStop(home: string): Promise<PlannedStopRead> {
  const read = await readJsonFile(join(home, PLANNED_STOP_FILE));
  if (read.kind !== "ok") return read;
  const record = asRecord(read.value);
  const pid = record?.target_pid;
  if (record === null || typeof pid !== "number" || !Number.isInteger(pid))
    return { kind: "corrupt" };
  return {
    kind: "ok",
    marker: {
      target_pid: pid,
      target_start_time:
        typeof record.target_start_time === "number" ? record.target_start_time : null,
      written_at: typeof record.written_at === "number" ? record.written_at : null,
    },
  };
}

export async function removePlannedStop(home: string): Promise<boolean> {
  return removeFile(join(home, PLANNED_STOP_FILE));
}

/** How a planned-stop marker relates to a given process. */
export type PlannedStopMatch = "self" | "other" | "stale";

/**
 * Pure: does `marker` name the process `self`? Another pid, or the same pid with a different
 * start time (both known), is `other`. A marker written more than `maxAgeMs` ago is `stale`
 * (a leftover, not a fresh request). A marker without `written_at` is taken as fresh.
 */
export function matchPlannedStop(
  marker: PlannedStop,
  self: { pid: number; startTime: number | null },
  now: number,
  maxAgeMs = PLANNED_STOP_MAX_AGE_MS,
): PlannedStopMatch {
  if (marker.target_pid !== self.pid) return "other";
  if (
    marker.target_start_time !== null &&
    self.startTime !== null &&
    Math.abs(marker.target_start_time - self.startTime) > 1000
  ) {
    return "other";
  }
  if (marker.written_at !== null && now - marker.written_at > maxAgeMs) return "stale";
  return "self";
}

/**
 * For the signal handler: when a SIGTERM arrives, was it announced for this process? Removes a
 * matching, stale or corrupt marker; leaves a marker meant for another process.
 */
export async function consumePlannedStopForSelf(
  home: string,
  self: { pid: number; startTime: number | null },
  now: number,
): Promise<boolean> {
  const read = await readPlannedStop(home);
  if (read.kind === "missing") return false;
  if (read.kind === "corrupt") {
    await removePlannedStop(home);
    return false;
  }
  const match = matchPlannedStop(read.marker, self, now);
  if (match === "other") return false;
  await removePlannedStop(home);
  return match === "self";
}

/** Requests an external drain (`keel gateway drain`, `POST /api/gateway/drain`). */
export async function writeDrainRequest(home: string, body: DrainRequest): Promise<void> {
  await writeJsonAtomic(join(home, DRAIN_REQUEST_FILE), body);
}

/** Cancels an external drain; true when one was requested. */
export async function removeDrainRequest(home: string): Promise<boolean> {
  return removeFile(join(home, DRAIN_REQUEST_FILE));
}

/**
 * Reads `.drain_request.json`: null when absent; its body when present; `{}` when present but
 * corrupt (a half-understood request still quiesces, the safe side).
 */
export async function readDrainRequest(home: string): Promise<DrainRequest | null> {
  const read = await readJsonFile(join(home, DRAIN_REQUEST_FILE));
  if (read.kind === "missing") return null;
  if (read.kind === "corrupt") return {};
  return asRecord(read.value) ?? {};
}
