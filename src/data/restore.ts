/**
 * `keel restore FILE`: puts a verified backup in place of a stopped home's data. What it replaces
 * (state.db and its WAL, memory, uploads, sent files, the files people sent; a Postgres
 * database's contents, dumped first) is moved aside into `restore-aside-<time>/`, never deleted.
 * config.yaml and control_token come back only where the home has none (a new machine): a backup
 * without secrets must not replace a working configuration.
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { StoreTarget } from "../config/store-target.js";
import { isGatewayAlive, readPidFile } from "../lifecycle/pid-file.js";
import { backupFileName, PG_DUMP, SQLITE_COPY } from "./backup.js";
import type { HomeData } from "./home-data.js";
import { type Verification, verifyBackup } from "./verify.js";

export type RestoreOutcome =
  | { kind: "restored"; aside: string; verification: Verification; notes: string[] }
  | { kind: "gateway_running"; pid: number }
  | { kind: "invalid"; verification: Verification }
  | { kind: "newer_schema"; verification: Verification }
  | { kind: "wrong_store"; backup: string; home: string };

/** Moves `from` to `to` when it exists (a rename; a copy across file systems). */
function moveAside(from: string, to: string): boolean {
  if (!existsSync(from)) return false;
  mkdirSync(join(to, ".."), { recursive: true, mode: 0o700 });
  try {
    renameSync(from, to);
  } catch {
    cpSync(from, to, { recursive: true });
    rmSync(from, { recursive: true, force: true });
  }
  return true;
}

async function restorePostgres(url: string, staged: string, aside: string): Promise<void> {
  const run = promisify(execFile);
  await run("pg_dump", ["--format=custom", "--no-owner", `--file=${join(aside, PG_DUMP)}`, url]);
  await run("pg_restore", [
    "--clean",
    "--if-exists",
    "--no-owner",
    "--single-transaction",
    `--dbname=${url}`,
    join(staged, PG_DUMP),
  ]);
}

function placeFiles(paths: HomeData, staged: string, aside: string, notes: string[]): void {
  const folders: [string, string, string][] = [
    [paths.memoryDir, "home/memory", "memory"],
    [paths.uploadsDir, "home/uploads", "uploads"],
    [paths.filesDir, "home/files", "files"],
    [paths.inboxDir, "home/workspace-inbox", "workspace-inbox"],
  ];
  for (const [live, inBackup, asideName] of folders) {
    moveAside(live, join(aside, asideName));
    if (existsSync(join(staged, inBackup))) moveAside(join(staged, inBackup), live);
  }
  for (const [live, inBackup] of [
    [paths.config, "home/config.yaml"],
    [paths.controlToken, "home/control_token"],
  ] as const) {
    if (!existsSync(join(staged, inBackup))) continue;
    if (existsSync(live)) notes.push(`kept the home's own ${inBackup.slice(5)}`);
    else moveAside(join(staged, inBackup), live);
  }
}

export async function restoreBackup(
  file: string,
  target: StoreTarget,
  paths: HomeData,
  now: number,
): Promise<RestoreOutcome> {
  const pid = await readPidFile(paths.home);
  if (pid && (await isGatewayAlive(pid))) return { kind: "gateway_running", pid: pid.pid };
  const staged = mkdtempSync(join(paths.home, ".restore-"));
  try {
    const verification = await verifyBackup(file, staged);
    if (!verification.ok || !verification.manifest) return { kind: "invalid", verification };
    if (verification.newerSchema) return { kind: "newer_schema", verification };
    if (verification.manifest.store !== target.kind) {
      return { kind: "wrong_store", backup: verification.manifest.store, home: target.kind };
    }
    const aside = join(paths.home, `restore-aside-${backupFileName(now).slice(12, -7)}`);
    mkdirSync(aside, { recursive: true, mode: 0o700 });
    const notes: string[] = [];
    if (target.kind === "sqlite") {
      for (const suffix of ["", "-wal", "-shm"]) {
        moveAside(`${paths.stateDb}${suffix}`, join(aside, `state.db${suffix}`));
      }
      moveAside(join(staged, SQLITE_COPY), paths.stateDb);
    } else {
      await restorePostgres(target.url, staged, aside);
    }
    placeFiles(paths, staged, aside, notes);
    return { kind: "restored", aside, verification, notes };
  } finally {
    rmSync(staged, { recursive: true, force: true });
  }
}
