/**
 * Retention (issue 41): removes what is older than `retention:` says, one transcript, session or
 * batch per store transaction with a pause between them, so a gateway running the job keeps
 * serving turns. The store leaves sessions with work in progress alone; the file sweep leaves
 * their upload folders and files still to be sent alone. `dryRun` reports without removing.
 */
import { type Dirent, readdirSync, rmdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  addPruneCounts,
  emptyPruneCounts,
  type PruneCounts,
  type RetentionCutoffs,
  type RetentionStore,
} from "../sessions/store.js";
import type { HomeData } from "./home-data.js";

export interface RetentionPolicy {
  transcripts_days?: number | undefined;
  uploads_days?: number | undefined;
  tool_output_days?: number | undefined;
  sessions_idle_days?: number | undefined;
}

export interface PruneReport extends PruneCounts {
  files: number;
  fileBytes: number;
}

const DAY_MS = 86_400_000;
/** Rows per loose-table batch, transcripts and sessions per listing. */
const BATCH = 200;

export function retentionConfigured(policy: RetentionPolicy): boolean {
  return Object.values(policy).some((v) => v !== undefined);
}

export function cutoffsOf(policy: RetentionPolicy, now: number): RetentionCutoffs {
  const before = (days: number | undefined) =>
    days === undefined ? undefined : now - days * DAY_MS;
  const c: RetentionCutoffs = {};
  const transcripts = before(policy.transcripts_days);
  const tools = before(policy.tool_output_days);
  const idle = before(policy.sessions_idle_days);
  if (transcripts !== undefined) c.transcriptsBefore = transcripts;
  if (tools !== undefined) c.toolOutputBefore = tools;
  if (idle !== undefined) c.sessionsIdleBefore = idle;
  return c;
}

export interface PruneOptions {
  dryRun: boolean;
  now: number;
  /** Awaited between two transactions (the gateway yields to its turns there). */
  pause?: () => Promise<void>;
  /** Stops between two steps when it returns true (the gateway is stopping). */
  stopped?: () => boolean;
}

export async function prune(
  store: RetentionStore,
  policy: RetentionPolicy,
  paths: HomeData,
  options: PruneOptions,
): Promise<PruneReport> {
  const cutoffs = cutoffsOf(policy, options.now);
  const pause = options.pause ?? (() => new Promise<void>((r) => setImmediate(r)));
  const stopped = options.stopped ?? (() => false);
  const report: PruneReport = { ...emptyPruneCounts(), files: 0, fileBytes: 0 };
  const prunes = cutoffs.transcriptsBefore !== undefined || cutoffs.toolOutputBefore !== undefined;
  for (let after: string | null = null; prunes && !stopped(); ) {
    const ids = await store.pruneCandidates(cutoffs, after, BATCH);
    for (const id of ids) {
      addPruneCounts(report, await store.pruneTranscript(id, cutoffs, options.dryRun));
      await pause();
    }
    if (ids.length < BATCH) break;
    after = ids[ids.length - 1]!;
  }
  const idleBefore = cutoffs.sessionsIdleBefore;
  for (let after: string | null = null; idleBefore !== undefined && !stopped(); ) {
    const keys = await store.idleSessions(idleBefore, after, BATCH);
    for (const key of keys) {
      addPruneCounts(report, await store.pruneSession(key, idleBefore, options.dryRun));
      await pause();
    }
    if (keys.length < BATCH) break;
    after = keys[keys.length - 1]!;
  }
  const looseBefore = cutoffs.transcriptsBefore;
  if (looseBefore !== undefined && options.dryRun) {
    addPruneCounts(report, await store.pruneLoose(looseBefore, Number.MAX_SAFE_INTEGER, true));
  }
  // Bounded: each batch removes at most BATCH rows per table, and the rows only grow older.
  for (let i = 0; looseBefore !== undefined && !options.dryRun && !stopped() && i < 10_000; i++) {
    const step = await store.pruneLoose(looseBefore, BATCH, false);
    addPruneCounts(report, step);
    if (step.inbox + step.outbox + step.events + step.approvals === 0) break;
    await pause();
  }
  if (policy.uploads_days !== undefined && !stopped()) {
    await pruneFiles(store, paths, options.now - policy.uploads_days * DAY_MS, options, report);
  }
  return report;
}

function entries(dir: string): Dirent[] {
  try {
    return readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
}

/** Removes one file older than `before`; adds it to the report. */
function pruneFile(path: string, before: number, dryRun: boolean, report: PruneReport): void {
  try {
    const stat = statSync(path);
    if (!stat.isFile() || stat.mtimeMs >= before) return;
    if (!dryRun) rmSync(path, { force: true });
    report.files += 1;
    report.fileBytes += stat.size;
  } catch {
    // Gone meanwhile: nothing to prune.
  }
}

async function pruneFiles(
  store: RetentionStore,
  paths: HomeData,
  before: number,
  options: PruneOptions,
  report: PruneReport,
): Promise<void> {
  const holds = await store.retentionHolds();
  const heldTranscripts = new Set(holds.transcripts);
  const heldFiles = new Set(holds.fileIds);
  for (const folder of entries(paths.inboxDir)) {
    if (!folder.isDirectory() || heldTranscripts.has(folder.name)) continue;
    const dir = join(paths.inboxDir, folder.name);
    for (const file of entries(dir))
      pruneFile(join(dir, file.name), before, options.dryRun, report);
    if (!options.dryRun && entries(dir).length === 0) rmdirSync(dir);
  }
  for (const file of entries(paths.filesDir)) {
    if (!heldFiles.has(file.name)) {
      pruneFile(join(paths.filesDir, file.name), before, options.dryRun, report);
    }
  }
  for (const file of entries(paths.uploadsDir)) {
    pruneFile(join(paths.uploadsDir, file.name), before, options.dryRun, report);
  }
}

/** One line per kind of data, for `keel prune` and the gateway's log. */
export function describePrune(report: PruneReport): string {
  const parts: [number, string][] = [
    [report.sessions, "idle sessions"],
    [report.transcripts, "old transcripts"],
    [report.messages, "messages"],
    [report.toolOutputs, "tool results (now a pruned marker)"],
    [report.inbox, "inbox rows"],
    [report.outbox, "outbox rows"],
    [report.events, "web chat and stream rows"],
    [report.approvals, "decided approvals"],
    [report.files, `files (${Math.round(report.fileBytes / 1024)} KiB)`],
  ];
  const said = parts.filter(([n]) => n > 0).map(([n, what]) => `${n} ${what}`);
  return said.length === 0 ? "nothing to prune" : said.join(", ");
}
