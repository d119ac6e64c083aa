/**
 * One person's data (issue 41): `keel user export` writes a zip of `person.json` (everything the
 * store holds about them), their memory file and the files they sent in their own chats;
 * `keel user forget` removes the same and records that it did, without content, in
 * `logs/audit.log`. Both work while the gateway runs (the store serialises the writes).
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { strToU8, type Zippable, zipSync } from "fflate";
import type { ForgetResult, PersonRef, RetentionStore } from "../sessions/store.js";
import type { HomeData } from "./home-data.js";

/** `telegram:42` → the person; null when it is not `PLATFORM:ID`. */
export function parsePerson(text: string): PersonRef | null {
  const match = /^([a-z][a-z0-9_]*):(.+)$/.exec(text);
  return match ? { platform: match[1]!, userId: match[2]! } : null;
}

function memoryPath(paths: HomeData, person: PersonRef): string {
  return join(paths.memoryDir, `${person.platform}-${person.userId}.md`);
}

function filesOf(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

export interface PersonExport {
  zip: Uint8Array;
  transcripts: number;
  messages: number;
  files: number;
}

export async function exportPerson(
  store: RetentionStore,
  paths: HomeData,
  person: PersonRef,
  now: number,
): Promise<PersonExport> {
  const data = await store.personData(person);
  const entries: Zippable = {
    "person.json": strToU8(
      JSON.stringify({ exported_at: new Date(now).toISOString(), ...data }, null, 2),
    ),
  };
  const memory = memoryPath(paths, person);
  if (existsSync(memory)) entries["memory.md"] = readFileSync(memory);
  let files = 0;
  for (const id of data.ownTranscripts) {
    const dir = join(paths.inboxDir, id);
    for (const name of filesOf(dir)) {
      entries[`uploads/${id}/${name}`] = readFileSync(join(dir, name));
      files += 1;
    }
  }
  return {
    zip: zipSync(entries, { level: 6 }),
    transcripts: data.transcripts.length,
    messages: data.transcripts.reduce((n, t) => n + t.messages.length, 0),
    files,
  };
}

export type ForgetOutcome = ForgetResult & { memoryFile?: boolean; uploadFolders?: number };

export async function forgetPerson(
  store: RetentionStore,
  paths: HomeData,
  person: PersonRef,
  now: number,
): Promise<ForgetOutcome> {
  const result = await store.forgetPerson(person);
  if (!result.ok) return result;
  const memory = memoryPath(paths, person);
  const memoryFile = existsSync(memory);
  rmSync(memory, { force: true });
  let uploadFolders = 0;
  for (const id of result.ownTranscripts) {
    const dir = join(paths.inboxDir, id);
    if (existsSync(dir)) uploadFolders += 1;
    rmSync(dir, { recursive: true, force: true });
  }
  const { ownTranscripts: _ids, ...counts } = result;
  audit(paths, {
    at: new Date(now).toISOString(),
    action: "user.forget",
    person: `${person.platform}:${person.userId}`,
    ...counts,
    memory_file: memoryFile,
    upload_folders: uploadFolders,
  });
  return { ...result, memoryFile, uploadFolders };
}

/** One JSON line in `logs/audit.log`: what was done, never the content it touched. */
export function audit(paths: HomeData, entry: Record<string, unknown>): void {
  mkdirSync(dirname(paths.auditLog), { recursive: true, mode: 0o700 });
  appendFileSync(paths.auditLog, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
}
