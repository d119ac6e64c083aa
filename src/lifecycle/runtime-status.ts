/**
 * `gateway_state.json`: what the gateway is doing, for `keel gateway status`, dashboards and
 * container boot scripts. Always written whole and atomically. A change of `gateway_state` is
 * written at once. While draining, `active_turns` changes are written at once too and everything
 * else at most once a second. While running, a change of `active_turns` alone (twice a turn) is
 * written at most once a second, and within a second of the last change: under load that is one
 * file write a second instead of two per turn (the live count is in `GET /api/status`).
 */

import { join } from "node:path";
import type { Logger } from "pino";
import { asRecord, readJsonFile, writeJsonAtomic } from "../lib/atomic-file.js";

export const RUNTIME_STATUS_FILE_NAME = "gateway_state.json";

export type GatewayState = "starting" | "running" | "draining" | "stopped" | "startup_failed";

export interface PlatformRuntimeStatus {
  state: string;
  error: string | null;
}

export interface RuntimeStatus {
  pid: number;
  /** Process start time, epoch milliseconds (as in `gateway.pid`). */
  start_time: number;
  gateway_state: GatewayState;
  exit_reason: string | null;
  restart_requested: boolean;
  active_turns: number;
  platforms: Record<string, PlatformRuntimeStatus>;
  /**
   * Where the gateway listens (the bound port) and its drain timeout, recorded once its HTTP
   * server is up: the CLI finds and stops it from these when config.yaml no longer loads.
   */
  http?: { host: string; port: number };
  drain_timeout_seconds?: number;
  /** ISO 8601, UTC. */
  updated_at: string;
}

export type RuntimeStatusUpdate = Partial<
  Pick<
    RuntimeStatus,
    | "gateway_state"
    | "exit_reason"
    | "restart_requested"
    | "active_turns"
    | "platforms"
    | "http"
    | "drain_timeout_seconds"
  >
>;

export interface RuntimeStatusWriter {
  /**
   * Merges `partial` into the status and writes it, unless held (see the header); a held change
   * goes out with the next write, with `flush()`, or once the interval since the last write ends.
   * Write failures are logged, never thrown.
   */
  update(partial: RuntimeStatusUpdate): Promise<void>;
  /** Writes the held state if a throttled change is pending. */
  flush(): Promise<void>;
  /**
   * Writes what is held, then writes nothing more (the stop's last write: a turn count arriving
   * after it must not rewrite the file, or recreate a home being removed, once the gateway exited).
   */
  close(): Promise<void>;
  /** The current in-memory status. */
  current(): RuntimeStatus;
}

export interface RuntimeStatusWriterOptions {
  home: string;
  pid: number;
  startTime: number;
  logger: Logger;
  now?: () => number;
  /** Minimum spacing of held writes (see the header). Default 1000 ms. */
  writeIntervalMs?: number;
  initialState?: GatewayState;
  /** Writes the file (default: writeJsonAtomic); tests count the writes through it. */
  writeJson?: (path: string, value: unknown) => Promise<void>;
}

/** Creates the single writer of `gateway_state.json` for this process. */
export function createRuntimeStatusWriter(
  options: RuntimeStatusWriterOptions,
): RuntimeStatusWriter {
  const now = options.now ?? Date.now;
  const interval = options.writeIntervalMs ?? 1000;
  const path = join(options.home, RUNTIME_STATUS_FILE_NAME);
  let status: RuntimeStatus = {
    pid: options.pid,
    start_time: options.startTime,
    gateway_state: options.initialState ?? "starting",
    exit_reason: null,
    restart_requested: false,
    active_turns: 0,
    platforms: {},
    updated_at: new Date(now()).toISOString(),
  };
  let lastWriteAt: number | null = null;
  let dirty = false;
  let closed = false;
  let trailing: NodeJS.Timeout | null = null;
  let inFlight: Promise<void> = Promise.resolve();
  let queued: Promise<void> | null = null;
  const writeJson = options.writeJson ?? writeJsonAtomic;

  // One write runs at a time and at most one waits behind it, writing whatever status is newest
  // when it starts: under load the writes never pile up, and an older snapshot can never be
  // renamed over a newer one.
  const write = (): Promise<void> => {
    lastWriteAt = now();
    if (trailing) clearTimeout(trailing);
    trailing = null;
    if (!queued) {
      const next = inFlight.then(() => {
        queued = null;
        dirty = false;
        status = { ...status, updated_at: new Date(now()).toISOString() };
        return writeJson(path, status).catch((error: unknown) => {
          options.logger.warn({ err: error, path }, "runtime status write failed");
        });
      });
      queued = next;
      inFlight = next;
    }
    return queued;
  };

  // A held change goes out once the interval has passed, even if nothing else changes.
  const holdUntilDue = (): Promise<void> => {
    dirty = true;
    if (!trailing && lastWriteAt !== null) {
      trailing = setTimeout(
        () => {
          trailing = null;
          if (dirty) void write();
        },
        Math.max(0, lastWriteAt + interval - now()),
      );
      trailing.unref();
    }
    return inFlight;
  };

  return {
    update(partial) {
      const previous = status;
      status = { ...status, ...partial };
      if (closed) return inFlight;
      const draining = previous.gateway_state === "draining";
      const onlyCount = Object.keys(partial).every((key) => key === "active_turns");
      const mustWrite =
        status.gateway_state !== previous.gateway_state ||
        (draining && status.active_turns !== previous.active_turns) ||
        (!draining && !onlyCount) ||
        lastWriteAt === null ||
        now() - lastWriteAt >= interval;
      return mustWrite ? write() : holdUntilDue();
    },
    flush() {
      return dirty ? write() : inFlight;
    },
    close() {
      const last = dirty ? write() : inFlight;
      closed = true;
      if (trailing) clearTimeout(trailing);
      trailing = null;
      return last;
    },
    current() {
      return status;
    },
  };
}

/** Reads `gateway_state.json`; null when missing or unreadable as a status. */
export async function readRuntimeStatus(home: string): Promise<RuntimeStatus | null> {
  let read: Awaited<ReturnType<typeof readJsonFile>>;
  try {
    read = await readJsonFile(join(home, RUNTIME_STATUS_FILE_NAME));
  } catch {
    return null;
  }
  if (read.kind !== "ok") return null;
  const record = asRecord(read.value);
  if (
    record === null ||
    typeof record.pid !== "number" ||
    typeof record.gateway_state !== "string"
  ) {
    return null;
  }
  return record as unknown as RuntimeStatus;
}
