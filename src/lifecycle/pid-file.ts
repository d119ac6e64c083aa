/**
 * `gateway.pid`: one running gateway per home folder. The record names the process by pid AND
 * start time, so a file left behind by a SIGKILLed gateway, or whose pid now belongs to another
 * program, never blocks the next start. Creation is atomic (hard link of a fully written temp
 * file), so of two gateways starting at once exactly one wins.
 */

import { readFileSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, rmdir, stat, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { asRecord, isNotFound, tempPathFor } from "../lib/atomic-file.js";
import {
  isProcessAlive,
  readProcessArgv,
  readProcessStartTime,
  sameStartTime,
} from "./process-info.js";

export const PID_FILE_NAME = "gateway.pid";

export interface PidRecord {
  pid: number;
  /** Process start time, epoch milliseconds. */
  start_time: number;
  argv: string[];
}

export type PidFileResult =
  | { ok: true; record: PidRecord; release(): Promise<void>; releaseSync(): void }
  | { ok: false; pid: number; message: string };

export interface AcquirePidFileOptions {
  argv: string[];
  /** Clock, used only when the operating system cannot tell this process's start time. */
  now: () => number;
  /** Defaults to this process; tests pass another. */
  pid?: number;
}

/** A takeover lock older than this was left by a crashed starter and is broken. */
const TAKEOVER_LOCK_STALE_MS = 5000;
const MAX_ATTEMPTS = 50;

/**
 * Claims `gateway.pid` in `home` for this process. Blocks (returns `ok: false`) only when the
 * file names a live process with the recorded start time whose command line looks like Keel.
 * Stale or corrupt files are replaced. `release()` removes the file only if it is still ours.
 */
export async function acquirePidFile(
  home: string,
  options: AcquirePidFileOptions,
): Promise<PidFileResult> {
  const pid = options.pid ?? process.pid;
  const startTime =
    (await readProcessStartTime(pid)) ?? options.now() - Math.round(process.uptime() * 1000);
  const record: PidRecord = { pid, start_time: startTime, argv: options.argv };
  const content = `${JSON.stringify(record)}\n`;
  const path = join(home, PID_FILE_NAME);
  await mkdir(home, { recursive: true, mode: 0o700 });
  const temp = tempPathFor(path);
  await writeFile(temp, content, { mode: 0o600 });
  try {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      if (await tryLink(temp, path)) return owned(path, record, content);
      const existing = await readRaw(path);
      if (existing === null) continue;
      const parsed = parsePidRecord(existing);
      if (parsed !== null && (await isGatewayAlive(parsed))) {
        return {
          ok: false,
          pid: parsed.pid,
          message: `Gateway already running (PID ${parsed.pid}).`,
        };
      }
      await removeStale(path, existing);
    }
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  throw new Error(`could not claim ${path}: it kept changing while starting`);
}

/** Reads `gateway.pid`; null when missing or not a valid record. */
export async function readPidFile(home: string): Promise<PidRecord | null> {
  const raw = await readRaw(join(home, PID_FILE_NAME));
  return raw === null ? null : parsePidRecord(raw);
}

/**
 * True when the record names a running gateway: the pid is alive (zombies are dead), its start
 * time matches the recorded one, and its command line is the recorded one or looks like Keel.
 * Facts the system will not tell (no /proc, no `ps`) do not count against it.
 */
export async function isGatewayAlive(record: PidRecord): Promise<boolean> {
  if (!(await isProcessAlive(record.pid))) return false;
  const liveStart = await readProcessStartTime(record.pid);
  if (liveStart !== null && !sameStartTime(liveStart, record.start_time)) return false;
  const liveArgv = await readProcessArgv(record.pid);
  return liveArgv === null || argvLooksLikeKeel(liveArgv, record.argv);
}

/**
 * The live command line carries the recorded script and arguments (the OS also lists the
 * runtime's own flags, which `process.argv` leaves out), or mentions keel and a gateway command.
 */
export function argvLooksLikeKeel(liveArgv: string[], recordedArgv: string[]): boolean {
  const recordedTail = recordedArgv.slice(1).filter((part) => part.length > 0);
  if (recordedTail.length > 0 && containsRun(liveArgv, recordedTail)) return true;
  const mentionsKeel = liveArgv.some((part) => /keel/i.test(part));
  return mentionsKeel && liveArgv.includes("gateway");
}

function containsRun(haystack: string[], needle: string[]): boolean {
  for (let start = 0; start + needle.length <= haystack.length; start++) {
    if (needle.every((part, index) => haystack[start + index] === part)) return true;
  }
  return false;
}

/** Parses a pid file's text; null for anything that is not a valid record. */
export function parsePidRecord(text: string): PidRecord | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  const record = asRecord(value);
  if (record === null) return null;
  const { pid, start_time: startTime, argv } = record;
  if (typeof pid !== "number" || !Number.isInteger(pid) || pid <= 0) return null;
  if (typeof startTime !== "number" || !Number.isFinite(startTime)) return null;
  const args = Array.isArray(argv)
    ? argv.filter((part): part is string => typeof part === "string")
    : [];
  return { pid, start_time: startTime, argv: args };
}

function owned(path: string, record: PidRecord, content: string): PidFileResult {
  return {
    ok: true,
    record,
    async release() {
      if ((await readRaw(path)) === content) await unlink(path).catch(() => undefined);
    },
    releaseSync() {
      try {
        if (readFileSync(path, "utf8") === content) unlinkSync(path);
      } catch {
        // Already gone or unreadable: nothing of ours to remove.
      }
    },
  };
}

async function tryLink(temp: string, path: string): Promise<boolean> {
  try {
    await link(temp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

async function readRaw(path: string): Promise<string | null> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    if (isNotFound(error)) return null;
    throw error;
  }
}

/**
 * Removes a pid file judged stale, under a takeover lock, and only if it still holds exactly
 * the stale content: a competitor may already have replaced it with a live record.
 */
async function removeStale(path: string, staleContent: string): Promise<void> {
  const lock = `${path}.takeover`;
  try {
    await mkdir(lock);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    await breakAbandonedLock(lock);
    await new Promise((resolve) => setTimeout(resolve, 10));
    return;
  }
  try {
    if ((await readRaw(path)) === staleContent) await unlink(path).catch(() => undefined);
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
}

async function breakAbandonedLock(lock: string): Promise<void> {
  try {
    const info = await stat(lock);
    if (Date.now() - info.mtimeMs > TAKEOVER_LOCK_STALE_MS) await rmdir(lock);
  } catch {
    // The holder finished meanwhile.
  }
}
