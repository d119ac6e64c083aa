/**
 * The data lifecycle's commands (issue 41): `keel prune [--dry-run]`, `keel user export|forget
 * PLATFORM:ID`, `keel backup [PATH] [--with-secrets]`, `keel backup --verify FILE`,
 * `keel restore FILE`. Exit codes: 0 done; 1 refused or failed (a verification that found a
 * problem, a gateway running on the home, a person with work in progress); 2 usage; 78 config.
 */
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Config } from "../config/schema.js";
import { storeTarget } from "../config/store-target.js";
import { backupFileName, writeBackup } from "../data/backup.js";
import { type HomeData, homeData } from "../data/home-data.js";
import { audit, exportPerson, forgetPerson, parsePerson } from "../data/person.js";
import { describePrune, prune } from "../data/prune.js";
import { restoreBackup } from "../data/restore.js";
import { type Verification, verifyBackup } from "../data/verify.js";
import { errorMessage } from "../lib/errors.js";
import type { PersonRef } from "../sessions/store.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";
import { withStore } from "./store-commands.js";

function configOf(options: GlobalOptions, io: CliIo): { config: Config; paths: HomeData } | number {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  return { config, paths: homeData(config.home, config.cwd) };
}

/** The person a `keel user` command names (`PLATFORM:ID`) and the home's data, or the exit code. */
function personTarget(
  who: string,
  options: GlobalOptions,
  io: CliIo,
): { person: PersonRef; paths: HomeData } | number {
  const person = parsePerson(who);
  if (!person) {
    io.err(`"${who}" is not a person: write it as PLATFORM:ID, e.g. telegram:4242.`);
    return EXIT.usage;
  }
  const loaded = configOf(options, io);
  return typeof loaded === "number" ? loaded : { person, paths: loaded.paths };
}

export async function pruneCommand(
  options: GlobalOptions & { dryRun?: boolean },
  io: CliIo,
): Promise<number> {
  const loaded = configOf(options, io);
  if (typeof loaded === "number") return loaded;
  const { config, paths } = loaded;
  const policy = config.retention;
  if (Object.values(policy).every((v) => v === undefined)) {
    io.out("No retention is configured (retention.* in config.yaml): everything is kept.");
    return EXIT.ok;
  }
  return withStore(options, io, async (store) => {
    const dryRun = options.dryRun === true;
    const report = await prune(store, policy, paths, { dryRun, now: Date.now() });
    io.out(`${dryRun ? "Would remove" : "Removed"}: ${describePrune(report)}.`);
    return EXIT.ok;
  });
}

export async function userExport(
  who: string,
  options: GlobalOptions & { out?: string },
  io: CliIo,
): Promise<number> {
  const target = personTarget(who, options, io);
  if (typeof target === "number") return target;
  const { person, paths } = target;
  const out = resolve(options.out ?? `keel-export-${person.platform}-${person.userId}.zip`);
  if (existsSync(out)) {
    io.err(`${out} already exists; choose a new path with --out.`);
    return EXIT.failure;
  }
  return withStore(options, io, async (store) => {
    const data = await exportPerson(store, paths, person, Date.now());
    writeFileSync(out, data.zip, { mode: 0o600, flag: "wx" });
    io.out(
      `Wrote ${out}: ${data.transcripts} conversations, ${data.messages} messages, ${data.files} files.`,
    );
    return EXIT.ok;
  });
}

export async function userForget(who: string, options: GlobalOptions, io: CliIo): Promise<number> {
  const target = personTarget(who, options, io);
  if (typeof target === "number") return target;
  const { person, paths } = target;
  return withStore(options, io, async (store) => {
    const result = await forgetPerson(store, paths, person, Date.now());
    if (!result.ok) {
      io.err(
        `${who} has work in progress (${result.busy}); nothing was removed. Try again once it has finished (or /stop it).`,
      );
      return EXIT.failure;
    }
    io.out(
      `Forgot ${who}: ${result.sessions} conversations (${result.messages} messages) removed, ${result.redacted} messages in shared chats redacted, ${result.pairing} pairing rows, ${result.approvals} approvals, memory file ${result.memoryFile ? "removed" : "none"}, ${result.uploadFolders} upload folders. Usage totals stay, without them. Logged in logs/audit.log.`,
    );
    return EXIT.ok;
  });
}

function report(verification: Verification, file: string, io: CliIo): number {
  const m = verification.manifest;
  if (!verification.ok || !m) {
    io.err(`${file} FAILED verification:`);
    for (const problem of verification.problems) io.err(`  - ${problem}`);
    return EXIT.failure;
  }
  io.out(
    `${file}: OK (${m.store}, schema ${m.counts.schemaVersion}, ${m.counts.sessions} sessions, ${m.counts.messages} messages, ${m.files.length} files, made ${m.created_at}${verification.newerSchema ? "; from a newer Keel: this version cannot restore it" : ""}).`,
  );
  return EXIT.ok;
}

/** Where a backup goes: PATH (a new file, or a folder to put it in), else `backup.dir`. */
function backupPath(path: string | undefined, config: Config, now: number): string {
  const dir = resolve(config.home, config.backup.dir ?? "backups");
  if (path === undefined) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return join(dir, backupFileName(now));
  }
  const target = resolve(path);
  if (existsSync(target) && statSync(target).isDirectory())
    return join(target, backupFileName(now));
  return target;
}

export async function backupCommand(
  path: string | undefined,
  options: GlobalOptions & { withSecrets?: boolean; verify?: string },
  io: CliIo,
): Promise<number> {
  if (options.verify !== undefined) {
    return report(await verifyBackup(resolve(options.verify)), options.verify, io);
  }
  const loaded = configOf(options, io);
  if (typeof loaded === "number") return loaded;
  const { config, paths } = loaded;
  const now = Date.now();
  const target = backupPath(path, config, now);
  if (existsSync(target)) {
    io.err(`${target} already exists; choose a new path.`);
    return EXIT.failure;
  }
  if (!existsSync(resolve(target, ".."))) {
    io.err(
      `keel: the folder ${resolve(target, "..")} does not exist; create it first or choose another path.`,
    );
    return EXIT.failure;
  }
  return withStore(options, io, async (store) => {
    try {
      const input = {
        store,
        target: storeTarget(config),
        paths,
        withSecrets: options.withSecrets === true,
        now,
      };
      const written = await writeBackup(input, target);
      io.out(`Backed up to ${target} (${Math.round(written.bytes / 1024)} KiB).`);
    } catch (err) {
      io.err(`keel: the backup to ${target} failed: ${errorMessage(err)}`);
      return EXIT.failure;
    }
    return report(await verifyBackup(target), target, io);
  });
}

export async function restoreCommand(
  file: string,
  options: GlobalOptions,
  io: CliIo,
): Promise<number> {
  const loaded = configOf(options, io);
  if (typeof loaded === "number") return loaded;
  const { config, paths } = loaded;
  const outcome = await restoreBackup(resolve(file), storeTarget(config), paths, Date.now());
  switch (outcome.kind) {
    case "gateway_running":
      io.err(
        `A gateway runs on ${config.home} (pid ${outcome.pid}); stop it first (keel gateway stop), then restore.`,
      );
      return EXIT.failure;
    case "invalid":
      return report(outcome.verification, file, io);
    case "newer_schema":
      io.err(
        `${file} comes from a newer Keel (schema ${outcome.verification.manifest?.counts.schemaVersion}); upgrade Keel before restoring it.`,
      );
      return EXIT.failure;
    case "wrong_store":
      io.err(
        `${file} is a ${outcome.backup} backup, but this home's store is ${outcome.home}; restore it where store.url selects the same kind.`,
      );
      return EXIT.failure;
    case "restored": {
      const m = outcome.verification.manifest!;
      audit(paths, {
        at: new Date().toISOString(),
        action: "restore",
        file: resolve(file),
        made: m.created_at,
        aside: outcome.aside,
      });
      io.out(
        `Restored ${file}: ${m.counts.sessions} sessions, ${m.counts.messages} messages, ${m.files.length} files. The replaced data is in ${outcome.aside}.`,
      );
      for (const note of outcome.notes) io.out(`Note: ${note}.`);
      return EXIT.ok;
    }
  }
}
