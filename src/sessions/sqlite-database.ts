/**
 * Opening a better-sqlite3 database whose native objects are never garbage-collected.
 *
 * better-sqlite3 12 built against Node >= 24.19's headers aborts the whole process when V8
 * finalizes one of its objects (a statement, a database) in a garbage collection that runs with
 * no JavaScript context entered: `RemoveEnvironmentCleanupHook … Assertion failed: (env) !=
 * nullptr`. Preparing statements and dropping them is enough to hit it within seconds (see
 * sqlite-database.test.ts). better-sqlite3 13 fixes it but does not run on Node 20, which Keel
 * still supports. So every database and every statement prepared on it stays reachable for the
 * life of the process: no finalizer ever runs, and Node deletes them through its own cleanup
 * hooks at exit. The cost is a few hundred bytes per statement; the store prepares each SQL text
 * once, so a gateway keeps a bounded set.
 */
import Database from "better-sqlite3";

const kept: object[] = [];

export function openSqliteDatabase(path: string, options?: Database.Options): Database.Database {
  const db = new Database(path, options);
  kept.push(db);
  const prepare = db.prepare.bind(db);
  db.prepare = ((source: string) => {
    const statement = prepare(source);
    kept.push(statement);
    return statement;
  }) as Database.Database["prepare"];
  // better-sqlite3's own pragma() prepares a fresh statement past the method above.
  db.pragma = ((source: string, options?: Database.PragmaOptions) => {
    const statement = db.prepare(`PRAGMA ${source}`);
    if (!statement.reader) {
      statement.run();
      return options?.simple ? undefined : [];
    }
    return options?.simple ? statement.pluck().get() : statement.all();
  }) as Database.Database["pragma"];
  return db;
}
