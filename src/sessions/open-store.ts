/**
 * Opening the store a config selects (src/config/store-target.ts). Each implementation is
 * imported only when selected: a SQLite gateway never loads `pg`.
 */
import type { StoreTarget } from "../config/store-target.js";
import type { PgStoreOptions } from "./pg-store.js";
import type { Store } from "./store.js";

/**
 * The Postgres store, usable at once: calls made while `pg` loads and the migrations run wait
 * for them, and fail with the reason when the database cannot be reached.
 */
export function openPostgresStore(url: string, options: PgStoreOptions = {}): Store {
  const opened = import("./pg-store.js").then(({ PgStore }) => PgStore.open(url, options));
  opened.catch(() => {});
  const closed = () => opened.then((store) => store.close()).catch(() => {});
  return new Proxy({} as Store, {
    get(_target, property) {
      if (property === "close") return closed;
      // Synchronous, unlike every other method: a Postgres store never fails for good (PgStore).
      if (property === "failure") return () => null;
      // Not a thenable: `await store` must not forward a call named "then".
      if (typeof property !== "string" || property === "then") return undefined;
      return (...args: unknown[]) =>
        opened.then((store) =>
          (store as unknown as Record<string, (...a: unknown[]) => unknown>)[property]!(...args),
        );
    },
  });
}

/** A store opened in-process for one CLI command (doctor, sessions, pairing, schedules). */
export interface CommandStore extends Store {
  schemaVersion(): number | Promise<number>;
}

export async function openCommandStore(target: StoreTarget): Promise<CommandStore> {
  if (target.kind === "postgres") {
    const { PgStore } = await import("./pg-store.js");
    return PgStore.open(target.url);
  }
  const { SqliteStore } = await import("./sqlite-store.js");
  return new SqliteStore(target.path);
}
