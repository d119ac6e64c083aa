/**
 * Small file primitives for the home folder's markers and status files: whole-file atomic
 * writes (temp file + rename, so readers never see half a file) and reads that tell "missing"
 * apart from "corrupt".
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

export type JsonRead = { kind: "missing" } | { kind: "corrupt" } | { kind: "ok"; value: unknown };

/** A temp path next to `path`, unique per process and call. */
export function tempPathFor(path: string): string {
  return `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
}

/**
 * Writes `data` to `path` atomically, creating the parent folder when it is missing.
 * Readers see the old content or the new one, never a mix.
 */
export async function writeFileAtomic(path: string, data: string, mode = 0o600): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temp = tempPathFor(path);
  try {
    await writeFile(temp, data, { mode });
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
}

/** Writes `value` as JSON to `path` atomically. */
export async function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(value)}\n`);
}

/**
 * Reads a JSON file. A missing file (or missing folder) is `missing`; unparsable content is
 * `corrupt`. Other file-system errors (permissions, a file where a folder should be) throw.
 */
export async function readJsonFile(path: string): Promise<JsonRead> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if (isNotFound(error)) return { kind: "missing" };
    throw error;
  }
  try {
    return { kind: "ok", value: JSON.parse(text) as unknown };
  } catch {
    return { kind: "corrupt" };
  }
}

/** Removes `path`; true when it existed. A missing file or folder is not an error. */
export async function removeFile(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}

/** True for "no such file" errors, including a missing parent folder. */
export function isNotFound(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | null)?.code === "ENOENT";
}

/** A plain JSON object, or null for anything else. */
export function asRecord(value: unknown): Record<string, unknown> | null {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}
