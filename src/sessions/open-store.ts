/**
 * Opening the store a config selects (src/config/store-target.ts). A SQLite gateway never
 * loads `pg`: the Postgres store imports it when it is opened.
 */
import type { StoreTarget } from "../config/store-target.js";
import { PgStore, type PgStoreOptions } from "./pg-store.js";
import type { Store } from "./store.js";

/**
 * The Postgres store, usable at once: its calls wait for `pg` to load and the migrations to run,
 * and fail with the reason when the database cannot be reached (PgStore).
 */
export function openPostgresStore(url: string, options: PgStoreOptions = {}): Store {
  return new PgStore(url, options);
}

/** A store opened in-process for one CLI command (doctor, sessions, pairing, schedules). */
export interface CommandStore extends Store {
  schemaVersion(): number | Promise<number>;
}

export async function openCommandStore(target: StoreTarget): Promise<CommandStore> {
  if (target.kind === "postgres") return PgStore.open(target.url);
  const { SqliteStore } = await import("./sqlite-store.js");
  return new SqliteStore(target.path);
}
