/**
 * ClusterStore (instances and leases) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, changes, DB_NOW, first, type PgContext } from "../pg-shared.js";
import type { InstanceInput, InstanceRecord, LeaseToken, SessionLease } from "../store.js";
import {
  type InstanceRow,
  type SessionLeaseRow,
  toInstance,
  toSessionLease,
} from "../store-rows.js";
import type { ClusterStore } from "./role.js";

export function pgCluster(s: PgContext): ClusterStore {
  const cluster: ClusterStore = {
    registerInstance(instance: InstanceInput): Promise<InstanceRecord> {
      return s.tx(async (db) => {
        const row = await first<InstanceRow>(
          db,
          `INSERT INTO instances (id, host, pid, started_at, heartbeat_at, platforms)
             VALUES ($1, $2, $3, $4, ${DB_NOW}, $5)
             ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,
               started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at,
               platforms = EXCLUDED.platforms
             RETURNING *`,
          [
            instance.id,
            instance.host,
            instance.pid,
            instance.startedAt,
            instance.platforms ? JSON.stringify(instance.platforms) : null,
          ],
        );
        return toInstance(row!);
      });
    },

    heartbeatInstance(id: string): Promise<boolean> {
      return s.tx(
        async (db) =>
          (await changes(db, `UPDATE instances SET heartbeat_at = ${DB_NOW} WHERE id = $1`, [
            id,
          ])) === 1,
      );
    },

    removeInstance(id: string): Promise<void> {
      return s.tx(async (db) => {
        await db.query("DELETE FROM instances WHERE id = $1", [id]);
        await db.query("UPDATE session_leases SET expires_at = 0 WHERE owner = $1", [id]);
      });
    },

    listInstances(): Promise<InstanceRecord[]> {
      return s.read(async (db) =>
        (
          await all<InstanceRow>(
            db,
            `SELECT *, ${DB_NOW} - heartbeat_at AS heartbeat_age_ms FROM instances
               ORDER BY started_at, id`,
          )
        ).map(toInstance),
      );
    },

    listLiveInstances(staleMs: number, platform?: string): Promise<string[]> {
      return s.read(async (db) =>
        (
          await all<{ id: string }>(
            db,
            `SELECT id FROM instances WHERE heartbeat_at > ${DB_NOW} - $1
               AND ($2::text IS NULL OR platforms IS NULL OR platforms::jsonb ? $2::text)
               ORDER BY id`,
            [staleMs, platform ?? null],
          )
        ).map((r) => r.id),
      );
    },

    removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]> {
      return s.tx(async (db) =>
        (
          await all<InstanceRow>(
            db,
            `DELETE FROM instances i WHERE i.heartbeat_at <= ${DB_NOW} - $1 AND NOT EXISTS (
               SELECT 1 FROM session_leases l JOIN turns t ON t.session_key = l.session_key
                 WHERE l.owner = i.id AND t.state = 'running')
               RETURNING *, ${DB_NOW} - heartbeat_at AS heartbeat_age_ms`,
            [silentForMs],
          )
        ).map(toInstance),
      );
    },

    async claimSessionLease(
      sessionKey: string,
      owner: string,
      ttlMs: number,
    ): Promise<SessionLease | null> {
      return (await cluster.claimSessionLeases([sessionKey], owner, ttlMs)).get(sessionKey) ?? null;
    },

    claimSessionLeases(
      sessionKeys: readonly string[],
      owner: string,
      ttlMs: number,
    ): Promise<Map<string, SessionLease>> {
      // Sorted: gateways claiming overlapping sets lock the rows in one order (no deadlock).
      const keys = [...new Set(sessionKeys)].sort();
      if (keys.length === 0) return Promise.resolve(new Map());
      return s.tx(async (db) => {
        // The row stays for good (a release only expires it): the fence never goes back.
        const rows = await all<SessionLeaseRow>(
          db,
          `INSERT INTO session_leases AS l (session_key, owner, fence, expires_at)
             SELECT key, $2, 1, ${DB_NOW} + $3 FROM unnest($1::text[]) AS k(key) ORDER BY key
             ON CONFLICT (session_key) DO UPDATE SET
               fence = CASE WHEN l.owner = EXCLUDED.owner THEN l.fence ELSE l.fence + 1 END,
               owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
             WHERE l.owner = EXCLUDED.owner OR l.expires_at <= ${DB_NOW}
             RETURNING *`,
          [keys, owner, ttlMs],
        );
        return new Map(rows.map((row) => [row.session_key, toSessionLease(row)]));
      });
    },

    renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null> {
      return s.tx(async (db) => {
        const row = await first<SessionLeaseRow>(
          db,
          `UPDATE session_leases SET expires_at = ${DB_NOW} + $4
             WHERE session_key = $1 AND owner = $2 AND fence = $3 AND expires_at > 0 RETURNING *`,
          [lease.sessionKey, lease.owner, lease.fence, ttlMs],
        );
        return row ? toSessionLease(row) : null;
      });
    },

    releaseSessionLease(lease: LeaseToken): Promise<void> {
      return s.tx(async (db) => {
        await db.query(
          `UPDATE session_leases SET expires_at = 0
             WHERE session_key = $1 AND owner = $2 AND fence = $3`,
          [lease.sessionKey, lease.owner, lease.fence],
        );
      });
    },

    releaseSessionLeases(leases: readonly LeaseToken[]): Promise<void> {
      if (leases.length === 0) return Promise.resolve();
      return s.tx(async (db) => {
        // Locked in key order first, as claimSessionLeases takes them: the two cannot deadlock.
        await db.query(
          `SELECT 1 FROM session_leases WHERE session_key = ANY($1::text[])
             ORDER BY session_key FOR UPDATE`,
          [[...new Set(leases.map((l) => l.sessionKey))]],
        );
        await db.query(
          `UPDATE session_leases AS l SET expires_at = 0
             FROM unnest($1::text[], $2::text[], $3::bigint[]) AS t(key, owner, fence)
             WHERE l.session_key = t.key AND l.owner = t.owner AND l.fence = t.fence`,
          [leases.map((l) => l.sessionKey), leases.map((l) => l.owner), leases.map((l) => l.fence)],
        );
      });
    },

    listSessionLeases(): Promise<SessionLease[]> {
      return s.read(async (db) =>
        (await all<SessionLeaseRow>(db, "SELECT * FROM session_leases ORDER BY session_key")).map(
          toSessionLease,
        ),
      );
    },
  };
  return cluster;
}
