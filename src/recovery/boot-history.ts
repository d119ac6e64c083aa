/**
 * `.boot_history.json`: when recent starts with resumable sessions happened, for the
 * restart-loop breaker. Only a short window is kept; an unreadable file is an empty history
 * (the breaker fails open rather than blocking recovery forever).
 */
import { join } from "node:path";
import { readJsonFile, writeJsonAtomic } from "../lib/atomic-file.js";

export const BOOT_HISTORY_FILE = ".boot_history.json";
const MAX_ENTRIES = 20;

/** Boot times (epoch ms) within `windowMs` before `now`, oldest first. */
export async function readBootHistory(
  home: string,
  now: number,
  windowMs: number,
): Promise<number[]> {
  let read: Awaited<ReturnType<typeof readJsonFile>>;
  try {
    read = await readJsonFile(join(home, BOOT_HISTORY_FILE));
  } catch {
    return [];
  }
  if (read.kind !== "ok" || typeof read.value !== "object" || read.value === null) return [];
  const boots = (read.value as { boots?: unknown }).boots;
  if (!Array.isArray(boots)) return [];
  return prune(
    boots.filter((at): at is number => typeof at === "number"),
    now,
    windowMs,
  );
}

/** Adds a boot at `now`, drops entries older than `windowMs`, and returns the kept history. */
export async function recordBoot(home: string, now: number, windowMs: number): Promise<number[]> {
  const boots = prune([...(await readBootHistory(home, now, windowMs)), now], now, windowMs);
  await writeJsonAtomic(join(home, BOOT_HISTORY_FILE), { boots });
  return boots;
}

function prune(boots: number[], now: number, windowMs: number): number[] {
  return boots
    .filter((at) => now - at <= windowMs && at <= now)
    .sort((a, b) => a - b)
    .slice(-MAX_ENTRIES);
}
