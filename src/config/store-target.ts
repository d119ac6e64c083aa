/**
 * Which store the config selects: `store.url` (KEEL_DATABASE_URL) = `postgres://…` or
 * `postgresql://…` keeps everything in that Postgres database, where several gateways may share
 * it; anything else, or nothing, keeps SQLite `state.db` in the home.
 */
import { join } from "node:path";

export type StoreTarget = { kind: "postgres"; url: string } | { kind: "sqlite"; path: string };

export function isPostgresUrl(url: string | undefined): url is string {
  return url !== undefined && /^postgres(ql)?:\/\//i.test(url);
}

export function storeTarget(config: {
  home: string;
  store: { url?: string | undefined };
}): StoreTarget {
  const { url } = config.store;
  return isPostgresUrl(url)
    ? { kind: "postgres", url }
    : { kind: "sqlite", path: join(config.home, "state.db") };
}

/** For logs and `keel doctor`: where the store is, without the password. */
export function describeStoreTarget(target: StoreTarget): string {
  if (target.kind === "sqlite") return target.path;
  try {
    const u = new URL(target.url);
    if (u.password) u.password = "***";
    return `Postgres ${u.toString()}`;
  } catch {
    return "Postgres (store.url does not parse as a URL)";
  }
}

/** A set `store.url` that selects nothing deserves a word: the store stays SQLite. */
export function storeUrlWarning(url: string | undefined): string | null {
  if (url === undefined || isPostgresUrl(url)) return null;
  return `store.url is not a postgres:// URL, so the store stays SQLite (state.db in the home); only postgres:// and postgresql:// select Postgres`;
}
