/**
 * `gateway_state.json`: what the gateway is doing, for `keel gateway status`, dashboards and
 * container boot scripts. Always written whole and atomically. While draining, writes are
 * throttled to one per second, except that a change of `active_turns` or `gateway_state` is
 * always written at once.
 */

import { join } from "node:path";
import type { Logger } from "pino";
import { asRecord, readJsonFile, writeJsonAtomic } from "./atomic-file.js";

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
  /** ISO 8601, UTC. */
  updated_at: string;
}

export type RuntimeStatusUpdate = Partial<
  Pick<
    RuntimeStatus,
    "gateway_state" | "exit_reason" | "restart_requested" | "active_turns" | "platforms"
  >
>;

export interface RuntimeStatusWriter {
  /**
   * Merges `partial` into the status and writes it, unless throttled (draining, less than the
   * interval since the last write, and neither `active_turns` nor `gateway_state` changed);
   * a throttled change is kept and goes out with the next write or `flush()`.
   * Write failures are logged, never thrown.
   */
  update(partial: RuntimeStatusUpdate): Promise<void>;
  /** Writes the held state if a throttled change is pending. */
  flush(): Promise<void>;
  /** The current in-memory status. */
  current(): RuntimeStatus;
}

export interface RuntimeStatusWriterOptions {
  home: string;
  pid: number;
  startTime: number;
  logger: Logger;
  now?: () => number;
  /** Minimum spacing of writes while draining. Default 1000 ms. */
  drainWriteIntervalMs?: number;
  initialState?: GatewayState;
}

/** Creates the single writer of `gateway_state.json` for this process. */
export function createRuntimeStatusWriter(
  options: RuntimeStatusWriterOptions,
): RuntimeStatusWriter {
  const now = options.now ?? Date.now;
  const interval = options.drainWriteIntervalMs ?? 1000;
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
  let chain: Promise<void> = Promise.resolve();

  const write = (): Promise<void> => {
    const at = now();
    lastWriteAt = at;
    dirty = false;
    status = { ...status, updated_at: new Date(at).toISOString() };
    const snapshot = status;
    // Serialised so an older snapshot can never be renamed over a newer one.
    chain = chain.then(() =>
      writeJsonAtomic(path, snapshot).catch((error: unknown) => {
        options.logger.warn({ err: error, path }, "runtime status write failed");
      }),
    );
    return chain;
  };

  return {
    update(partial) {
      const previous = status;
      status = { ...status, ...partial };
      const mustWrite =
        status.gateway_state !== previous.gateway_state ||
        status.active_turns !== previous.active_turns ||
        previous.gateway_state !== "draining" ||
        lastWriteAt === null ||
        now() - lastWriteAt >= interval;
      if (mustWrite) return write();
      dirty = true;
      return chain;
    },
    flush() {
      return dirty ? write() : chain;
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
