/**
 * File modes of the Keel home, enforced at every start: the home holds the control token, the
 * config (with keys), the store (every transcript) and the logs, so only the gateway's user may
 * read them. A home created beforehand at 0755, or files copied in at 0644, are tightened here,
 * each with a warning, because a looser mode means someone may already have read them.
 */
import { chmodSync, lstatSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** Private files in the home (those present are tightened). */
export const PRIVATE_FILES = [
  "state.db",
  "state.db-wal",
  "state.db-shm",
  "gateway.pid",
  "control_token",
  "config.yaml",
] as const;

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** One mode that was looser than it should be and has been tightened. */
export interface ModeFix {
  path: string;
  /** The permission bits found (e.g. 0o644). */
  was: number;
  now: number;
  /** Set when the change failed (e.g. the file belongs to another user). */
  error?: string;
}

/**
 * Tightens the home (0700), its private files (0600), `logs/` (0700) and every file in it
 * (0600). Only bits are removed (a mode already tighter stays as it is); symlinks inside the home
 * are left alone (chmod would change their target), the home itself may be one; missing entries
 * are skipped. Returns what it changed or failed to change. Synchronous; never throws.
 */
export function enforceHomeModes(home: string): ModeFix[] {
  const fixes: ModeFix[] = [];
  tighten(home, PRIVATE_DIR_MODE, fixes, true);
  for (const name of PRIVATE_FILES) tighten(join(home, name), PRIVATE_FILE_MODE, fixes);
  const logs = join(home, "logs");
  if (tighten(logs, PRIVATE_DIR_MODE, fixes) === "dir") {
    try {
      for (const entry of readdirSync(logs, { withFileTypes: true })) {
        if (entry.isFile()) tighten(join(logs, entry.name), PRIVATE_FILE_MODE, fixes);
      }
    } catch {
      // Unreadable logs folder: its mode was reported above if it was wrong.
    }
  }
  return fixes;
}

/** The warning logged for a fix. */
export function describeModeFix(fix: ModeFix): string {
  const found = `${fix.path} was open to other users (mode ${octal(fix.was)})`;
  if (fix.error) return `${found}; could not change it to ${octal(fix.now)}: ${fix.error}`;
  return `${found}; changed to ${octal(fix.now)}`;
}

function tighten(
  path: string,
  limit: number,
  fixes: ModeFix[],
  followLink = false,
): "dir" | "file" | undefined {
  let info: ReturnType<typeof lstatSync>;
  try {
    info = followLink ? statSync(path) : lstatSync(path);
  } catch {
    return undefined;
  }
  if (info.isSymbolicLink()) return undefined;
  const was = info.mode & 0o777;
  const now = was & limit;
  if (now !== was) {
    try {
      chmodSync(path, now);
      fixes.push({ path, was, now });
    } catch (error) {
      fixes.push({ path, was, now, error: (error as Error).message });
    }
  }
  return info.isDirectory() ? "dir" : "file";
}

function octal(mode: number): string {
  return `0${mode.toString(8).padStart(3, "0")}`;
}
