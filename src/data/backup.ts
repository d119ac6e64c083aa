/**
 * `keel backup`: one gzipped tar holding a consistent copy of the store (SQLite: `VACUUM INTO`;
 * Postgres: `pg_dump --format=custom`), the files that matter (memory, uploads, sent files, the
 * files people sent), config.yaml without secrets unless asked, and `manifest.json`: the store's
 * schema version and counts and every file's size and SHA-256. It is verified (verify.ts) before
 * the command says it is done.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  createReadStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import * as tar from "tar";
import type { StoreTarget } from "../config/store-target.js";
import { KEEL_VERSION } from "../lib/version.js";
import { inspectSqliteFile } from "../sessions/sqlite-inspect.js";
import type { RetentionStore, StoreCounts, StoreHandle } from "../sessions/store.js";
import { withoutSecrets } from "./config-secrets.js";
import type { HomeData } from "./home-data.js";

export const MANIFEST = "manifest.json";
export const SQLITE_COPY = "state.db";
export const PG_DUMP = "store.pgdump";
const FORMAT = "keel-backup";

export interface ManifestFile {
  path: string;
  size: number;
  sha256: string;
}

export interface BackupManifest {
  format: typeof FORMAT;
  version: 1;
  created_at: string;
  keel_version: string;
  store: "sqlite" | "postgres";
  with_secrets: boolean;
  counts: StoreCounts;
  files: ManifestFile[];
}

export interface BackupInput {
  store: RetentionStore & StoreHandle;
  target: StoreTarget;
  paths: HomeData;
  withSecrets: boolean;
  now: number;
}

const run = promisify(execFile);

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Every regular file under `dir`, as paths relative to it with `/` separators. */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) out.push(relative(dir, path).split(sep).join("/"));
    }
  };
  walk(dir);
  return out.sort();
}

/** `keel-backup-2026-11-28T02-30-00Z.tar.gz`: sorts by time, safe in any file system. */
export function backupFileName(now: number): string {
  const stamp = new Date(now)
    .toISOString()
    .replace(/\.\d+Z$/, "Z")
    .replace(/:/g, "-");
  return `keel-backup-${stamp}.tar.gz`;
}

/** Copies the store into `staging`; the counts are the copy's own for SQLite. */
async function copyStore(input: BackupInput, staging: string): Promise<StoreCounts> {
  if (input.target.kind === "sqlite") {
    const copy = join(staging, SQLITE_COPY);
    await input.store.backup(copy);
    chmodSync(copy, 0o600);
    return inspectSqliteFile(copy).counts;
  }
  // The counts come from their own snapshot, a moment before the dump's.
  const counts = await input.store.storeCounts();
  await run("pg_dump", [
    "--format=custom",
    "--no-owner",
    `--file=${join(staging, PG_DUMP)}`,
    input.target.url,
  ]);
  return counts;
}

/** The home's files that matter, copied under `staging/home/…`. */
function copyFiles(input: BackupInput, staging: string): void {
  const { paths } = input;
  const folders: [string, string][] = [
    [paths.memoryDir, "home/memory"],
    [paths.uploadsDir, "home/uploads"],
    [paths.filesDir, "home/files"],
    [paths.inboxDir, "home/workspace-inbox"],
  ];
  for (const [from, to] of folders) {
    if (existsSync(from)) cpSync(from, join(staging, to), { recursive: true });
  }
  if (existsSync(paths.config)) {
    const text = readFileSync(paths.config, "utf8");
    const kept = input.withSecrets ? text : withoutSecrets(text).text;
    writeFileSync(join(staging, "home/config.yaml"), kept, { mode: 0o600 });
  }
  if (input.withSecrets && existsSync(paths.controlToken)) {
    cpSync(paths.controlToken, join(staging, "home/control_token"));
  }
}

export interface BackupResult {
  path: string;
  bytes: number;
  manifest: BackupManifest;
}

/** Writes the archive to `path` (which must not exist), private from its first byte. */
export async function writeBackup(input: BackupInput, path: string): Promise<BackupResult> {
  const staging = mkdtempSync(join(dirname(path), ".keel-backup-"));
  const partial = join(dirname(path), `.${basename(path)}.partial`);
  try {
    chmodSync(staging, 0o700);
    mkdirSync(join(staging, "home"), { mode: 0o700 });
    const counts = await copyStore(input, staging);
    copyFiles(input, staging);
    const files: ManifestFile[] = [];
    for (const file of listFiles(staging)) {
      const full = join(staging, file);
      files.push({ path: file, size: statSync(full).size, sha256: await sha256File(full) });
    }
    const manifest: BackupManifest = {
      format: FORMAT,
      version: 1,
      created_at: new Date(input.now).toISOString(),
      keel_version: KEEL_VERSION,
      store: input.target.kind,
      with_secrets: input.withSecrets,
      counts,
      files,
    };
    writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, {
      mode: 0o600,
    });
    writeFileSync(partial, "", { mode: 0o600, flag: "wx" });
    await tar.c({ gzip: true, file: partial, cwd: staging, portable: true }, [
      MANIFEST,
      ...files.map((f) => f.path),
    ]);
    chmodSync(partial, 0o600);
    renameSync(partial, path);
    return { path, bytes: statSync(path).size, manifest };
  } finally {
    rmSync(staging, { recursive: true, force: true });
    rmSync(partial, { force: true });
  }
}
