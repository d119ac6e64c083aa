/**
 * `keel backup --verify FILE`: unpacks a backup into a private scratch folder and checks it whole:
 * the manifest, every file's size and SHA-256 (and no file it does not list), the store copy's
 * integrity (SQLite's integrity_check; `pg_restore --list` for a Postgres dump), its schema
 * version against this Keel, and its counts against the manifest's.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import * as tar from "tar";
import { errorMessage } from "../lib/errors.js";
import { inspectSqliteFile, knownSchemaVersion } from "../sessions/sqlite-inspect.js";
import {
  type BackupManifest,
  listFiles,
  MANIFEST,
  PG_DUMP,
  SQLITE_COPY,
  sha256File,
} from "./backup.js";

export interface Verification {
  /** Nothing wrong. */
  ok: boolean;
  problems: string[];
  manifest: BackupManifest | null;
  /** The backup's schema is newer than this Keel's (restore refuses it). */
  newerSchema: boolean;
}

async function checkFiles(dir: string, manifest: BackupManifest, problems: string[]) {
  const listed = new Set(manifest.files.map((f) => f.path));
  for (const file of manifest.files) {
    const path = join(dir, file.path);
    if (!existsSync(path)) {
      problems.push(`${file.path} is missing`);
      continue;
    }
    if (statSync(path).size !== file.size) problems.push(`${file.path} has the wrong size`);
    else if ((await sha256File(path)) !== file.sha256)
      problems.push(`${file.path} fails its checksum`);
  }
  for (const file of listFiles(dir)) {
    if (file !== MANIFEST && !listed.has(file)) problems.push(`${file} is not in the manifest`);
  }
}

function checkSqlite(dir: string, manifest: BackupManifest, problems: string[]): boolean {
  try {
    const report = inspectSqliteFile(join(dir, SQLITE_COPY));
    if (report.integrity !== "ok")
      problems.push(`the database copy is damaged: ${report.integrity}`);
    for (const [name, value] of Object.entries(manifest.counts)) {
      const found = report.counts[name as keyof typeof report.counts];
      if (found !== value)
        problems.push(`the copy holds ${found} ${name}, the manifest says ${value}`);
    }
    return report.counts.schemaVersion > report.knownSchemaVersion;
  } catch (err) {
    problems.push(`the database copy cannot be read: ${errorMessage(err)}`);
    return false;
  }
}

async function checkPgDump(dir: string, problems: string[]): Promise<void> {
  try {
    await promisify(execFile)("pg_restore", ["--list", join(dir, PG_DUMP)]);
  } catch (err) {
    problems.push(`pg_restore cannot read the dump: ${errorMessage(err)}`);
  }
}

/** Verifies `file`, unpacked into `into` (kept for restore) or a scratch folder removed after. */
export async function verifyBackup(file: string, into?: string): Promise<Verification> {
  const dir = into ?? mkdtempSync(join(tmpdir(), "keel-verify-"));
  const problems: string[] = [];
  let manifest: BackupManifest | null = null;
  let newerSchema = false;
  try {
    await tar.x({ file, cwd: dir, strict: true });
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST), "utf8")) as BackupManifest;
    if (manifest.format !== "keel-backup" || manifest.version !== 1) {
      problems.push("manifest.json is not a Keel backup manifest this version reads");
    } else {
      await checkFiles(dir, manifest, problems);
      if (manifest.store === "sqlite") newerSchema = checkSqlite(dir, manifest, problems);
      else {
        await checkPgDump(dir, problems);
        newerSchema = manifest.counts.schemaVersion > knownSchemaVersion();
      }
    }
  } catch (err) {
    problems.push(`the archive cannot be read: ${errorMessage(err)}`);
  } finally {
    if (!into) rmSync(dir, { recursive: true, force: true });
  }
  return { ok: problems.length === 0, problems, manifest, newerSchema };
}
