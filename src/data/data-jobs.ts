/**
 * The gateway's own data jobs, off every turn's path: retention (hourly, when `retention.*` is
 * set; the first pass a minute after start) and scheduled backups (`backup.every`, keeping the
 * newest `backup.keep` in `backup.dir`). Each store call is one small transaction with a yield
 * between them; a stop ends a pass between two of them. The last backup's outcome is written to
 * `<home>/backup_state.json`, which `keel gateway status` shows.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { storeTarget } from "../config/store-target.js";
import { writeJsonAtomic } from "../lib/atomic-file.js";
import { errorMessage } from "../lib/errors.js";
import { startPolling, type Watcher } from "../lifecycle/lifecycle-phase.js";
import type { Store } from "../sessions/store.js";
import { homeData } from "./home-data.js";
import { describePrune, prune, retentionConfigured } from "./prune.js";

const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_FIRST_AFTER_MS = 60_000;
export const BACKUP_STATE_FILE = "backup_state.json";

export interface BackupState {
  at: string;
  ok: boolean;
  path: string | null;
  bytes: number | null;
  error: string | null;
}

export interface DataJobsDeps {
  store: Store;
  config: Config;
  logger: Logger;
  now: () => number;
}

/** Runs `tick` every `everyMs`, the first time after `firstMs`. */
function every(firstMs: number, everyMs: number, tick: (stopped: () => boolean) => Promise<void>) {
  let started = false;
  let delay: NodeJS.Timeout | null = null;
  let polling: Watcher | null = null;
  delay = setTimeout(() => {
    started = true;
    polling = startPolling(async (stopped) => {
      await tick(stopped);
      return "continue";
    }, everyMs);
  }, firstMs);
  return {
    async stop() {
      if (delay) clearTimeout(delay);
      if (started) await polling?.stop();
    },
  };
}

export function startDataJobs(deps: DataJobsDeps): Watcher {
  const { config, logger } = deps;
  const watchers: Watcher[] = [];
  const paths = homeData(config.home, config.cwd);
  if (retentionConfigured(config.retention)) {
    watchers.push(
      every(PRUNE_FIRST_AFTER_MS, PRUNE_EVERY_MS, async (stopped) => {
        try {
          const report = await prune(deps.store, config.retention, paths, {
            dryRun: false,
            now: deps.now(),
            stopped,
          });
          logger.info({ component: "retention", ...report }, `retention: ${describePrune(report)}`);
        } catch (err) {
          logger.error({ component: "retention", err }, "retention pass failed");
        }
      }),
    );
  }
  const backupEvery = config.backup.every;
  if (backupEvery !== undefined) {
    const ms = backupEvery * 1000;
    watchers.push(
      every(ms, ms, async () => {
        await scheduledBackup(deps);
      }),
    );
  }
  return {
    async stop() {
      for (const watcher of watchers) await watcher.stop();
    },
  };
}

/** One scheduled backup: written, verified, the oldest beyond `backup.keep` removed. */
export async function scheduledBackup(deps: DataJobsDeps): Promise<BackupState> {
  const { config, logger } = deps;
  const dir = resolve(config.home, config.backup.dir ?? "backups");
  let state: BackupState;
  try {
    // Loaded when a backup is due (most gateways never take one, and tar is a large package),
    // inside the try: a load that fails is a failed backup, logged and shown in the status.
    const { backupFileName, writeBackup } = await import("./backup.js");
    const { verifyBackup } = await import("./verify.js");
    const path = join(dir, backupFileName(deps.now()));
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const input = {
      store: deps.store,
      target: storeTarget(config),
      paths: homeData(config.home, config.cwd),
      withSecrets: false,
      now: deps.now(),
    };
    const written = await writeBackup(input, path);
    const verification = await verifyBackup(path);
    if (!verification.ok) throw new Error(verification.problems.join("; "));
    const old = readdirSync(dir)
      .filter((f) => /^keel-backup-.*\.tar\.gz$/.test(f))
      .sort()
      .reverse()
      .slice(config.backup.keep);
    for (const file of old) rmSync(join(dir, file), { force: true });
    state = {
      at: new Date(deps.now()).toISOString(),
      ok: true,
      path,
      bytes: written.bytes,
      error: null,
    };
    logger.info(
      { component: "backup", path, bytes: written.bytes },
      "scheduled backup written and verified",
    );
  } catch (err) {
    state = {
      at: new Date(deps.now()).toISOString(),
      ok: false,
      path: null,
      bytes: null,
      error: errorMessage(err),
    };
    logger.error({ component: "backup", err }, "scheduled backup failed");
  }
  await writeJsonAtomic(join(config.home, BACKUP_STATE_FILE), state);
  return state;
}

/** The last scheduled backup's outcome, or null before the first. */
export function readBackupState(home: string): BackupState | null {
  const path = join(home, BACKUP_STATE_FILE);
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as BackupState;
  } catch {
    return null;
  }
}
