/**
 * Reading a SQLite store file that no gateway uses (a backup's copy): SQLite's own integrity
 * check, its schema version against this Keel's migrations, and the counts a manifest records.
 */

import type { StoreCounts } from "./retention-records.js";
import { openSqliteDatabase } from "./sqlite-database.js";
import { MIGRATIONS } from "./sqlite-migrations.js";

export interface SqliteFileReport {
  /** "ok", or what `PRAGMA integrity_check` found. */
  integrity: string;
  counts: StoreCounts;
  /** The schema version this Keel migrates to: a file past it comes from a newer Keel. */
  knownSchemaVersion: number;
}

export function inspectSqliteFile(path: string): SqliteFileReport {
  const db = openSqliteDatabase(path, { readonly: true, fileMustExist: true });
  try {
    const integrity = (db.prepare("PRAGMA integrity_check").pluck().all() as string[]).join("; ");
    const count = (table: string) => {
      try {
        return db.prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get() as number;
      } catch {
        return -1;
      }
    };
    return {
      integrity,
      counts: {
        schemaVersion: db.prepare("PRAGMA user_version").pluck().get() as number,
        sessions: count("sessions"),
        transcripts: count("transcripts"),
        messages: count("messages"),
        inbox: count("inbox"),
        outbox: count("outbox"),
      },
      knownSchemaVersion: MIGRATIONS.length,
    };
  } finally {
    db.close();
  }
}

/** The schema version this Keel migrates a store to (both engines have as many migrations). */
export function knownSchemaVersion(): number {
  return MIGRATIONS.length;
}
