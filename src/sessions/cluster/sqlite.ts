/**
 * ClusterStore (instances and leases) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */

import type { SqliteContext } from "../sqlite-shared.js";
import type { InstanceInput, InstanceRecord, LeaseToken, SessionLease } from "../store.js";
import {
  type InstanceRow,
  type SessionLeaseRow,
  toInstance,
  toSessionLease,
} from "../store-rows.js";
import type { ClusterStore } from "./role.js";

/** See ClusterStore.claimSessionLease. */
function claimSync(
  s: SqliteContext,
  sessionKey: string,
  owner: string,
  ttlMs: number,
): SessionLease | null {
  const now = s.now();
  // The row stays for good (a release only expires it): the fence never goes back.
  const row = s
    .stmt(
      `INSERT INTO session_leases (session_key, owner, fence, expires_at) VALUES (?, ?, 1, ?)
       ON CONFLICT (session_key) DO UPDATE SET
         fence = CASE WHEN owner = excluded.owner THEN fence ELSE fence + 1 END,
         owner = excluded.owner, expires_at = excluded.expires_at
       WHERE owner = excluded.owner OR expires_at <= ?
       RETURNING *`,
    )
    .get(sessionKey, owner, now + ttlMs, now) as SessionLeaseRow | undefined;
  return row ? toSessionLease(row) : null;
}

function releaseSync(s: SqliteContext, lease: LeaseToken): void {
  s.stmt(
    "UPDATE session_leases SET expires_at = 0 WHERE session_key = ? AND owner = ? AND fence = ?",
  ).run(lease.sessionKey, lease.owner, lease.fence);
}

export function sqliteCluster(s: SqliteContext): ClusterStore {
  return {
    registerInstance(instance: InstanceInput): Promise<InstanceRecord> {
      return s.tx(() => {
        s.stmt(
          `INSERT INTO instances (id, host, pid, started_at, heartbeat_at, platforms)
             VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
               started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
               platforms = excluded.platforms`,
        ).run(
          instance.id,
          instance.host,
          instance.pid,
          instance.startedAt,
          s.now(),
          instance.platforms ? JSON.stringify(instance.platforms) : null,
        );
        return toInstance(
          s.stmt("SELECT * FROM instances WHERE id = ?").get(instance.id) as InstanceRow,
        );
      });
    },

    heartbeatInstance(id: string): Promise<boolean> {
      return s.tx(
        () =>
          s.stmt("UPDATE instances SET heartbeat_at = ? WHERE id = ?").run(s.now(), id).changes ===
          1,
      );
    },

    removeInstance(id: string): Promise<void> {
      return s.tx(() => {
        s.stmt("DELETE FROM instances WHERE id = ?").run(id);
        s.stmt("UPDATE session_leases SET expires_at = 0 WHERE owner = ?").run(id);
      });
    },

    listInstances(): Promise<InstanceRecord[]> {
      return s.read(() =>
        (
          s
            .stmt(
              "SELECT *, ? - heartbeat_at AS heartbeat_age_ms FROM instances ORDER BY started_at, id",
            )
            .all(s.now()) as InstanceRow[]
        ).map(toInstance),
      );
    },

    listLiveInstances(staleMs: number, platform?: string): Promise<string[]> {
      return s.read(() =>
        (
          s
            .stmt(
              `SELECT id FROM instances WHERE heartbeat_at > ? AND (? IS NULL OR platforms IS NULL
               OR EXISTS (SELECT 1 FROM json_each(platforms) WHERE value = ?)) ORDER BY id`,
            )
            .all(s.now() - staleMs, platform ?? null, platform ?? null) as { id: string }[]
        ).map((r) => r.id),
      );
    },

    removeDeadInstances(silentForMs: number): Promise<InstanceRecord[]> {
      return s.tx(() => {
        const now = s.now();
        const removed = s
          .stmt(
            `DELETE FROM instances WHERE heartbeat_at <= ? AND NOT EXISTS (
             SELECT 1 FROM session_leases l JOIN turns t ON t.session_key = l.session_key
               WHERE l.owner = instances.id AND t.state = 'running')
             RETURNING *, ? - heartbeat_at AS heartbeat_age_ms`,
          )
          .all(now - silentForMs, now) as InstanceRow[];
        return removed.map(toInstance);
      });
    },

    claimSessionLease(
      sessionKey: string,
      owner: string,
      ttlMs: number,
    ): Promise<SessionLease | null> {
      return s.tx(() => claimSync(s, sessionKey, owner, ttlMs));
    },

    claimSessionLeases(
      sessionKeys: readonly string[],
      owner: string,
      ttlMs: number,
    ): Promise<Map<string, SessionLease>> {
      return s.tx(() => {
        const taken = new Map<string, SessionLease>();
        for (const key of new Set(sessionKeys)) {
          const lease = claimSync(s, key, owner, ttlMs);
          if (lease) taken.set(key, lease);
        }
        return taken;
      });
    },

    renewSessionLease(lease: LeaseToken, ttlMs: number): Promise<SessionLease | null> {
      return s.tx(() => {
        const row = s
          .stmt(
            `UPDATE session_leases SET expires_at = ?
             WHERE session_key = ? AND owner = ? AND fence = ? AND expires_at > 0 RETURNING *`,
          )
          .get(s.now() + ttlMs, lease.sessionKey, lease.owner, lease.fence) as
          | SessionLeaseRow
          | undefined;
        return row ? toSessionLease(row) : null;
      });
    },

    releaseSessionLease(lease: LeaseToken): Promise<void> {
      return s.tx(() => releaseSync(s, lease));
    },

    releaseSessionLeases(leases: readonly LeaseToken[]): Promise<void> {
      return s.tx(() => {
        for (const lease of leases) releaseSync(s, lease);
      });
    },

    listSessionLeases(): Promise<SessionLease[]> {
      return s.read(() =>
        (
          s.stmt("SELECT * FROM session_leases ORDER BY session_key").all() as SessionLeaseRow[]
        ).map(toSessionLease),
      );
    },
  };
}
