/**
 * PairingStore (pairing) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`). The statements
 * are in pairing/statements.ts, shared with SQLite.
 */

import type { PgContext } from "../pg-shared.js";
import { all, changes, ensureSessionIn, first, insertOutbox, pgSql } from "../pg-shared.js";
import type { PairingStore } from "../roles.js";
import { newPairingCode } from "../session-id.js";
import { type PairingRow, toPairing } from "../store-rows.js";
import * as sql from "./statements.js";

export function pgPairing(s: PgContext): PairingStore {
  return {
    requestPairing(input) {
      return s.tx(async (db) => {
        // The cap counts a platform's live codes: two instances must not both see room for one more.
        await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `keel:pairing:${input.platform}`,
        ]);
        const now = s.now();
        const live = await all<PairingRow>(db, pgSql(sql.LIVE_CODES), [input.platform, now]);
        const mine = live.find((r) => r.user_id === input.userId);
        if (mine) return toPairing(mine);
        if (live.length >= input.maxPending) return null;
        const params = sql.codeParams(newPairingCode(), input, now);
        return toPairing((await first<PairingRow>(db, pgSql(sql.INSERT_CODE), params))!);
      });
    },

    listPairingRequests(platform?) {
      return s.read(async (db) => {
        const params = [s.now(), platform ?? null, platform ?? null];
        return (await all<PairingRow>(db, pgSql(sql.LIST_REQUESTS), params)).map(toPairing);
      });
    },

    approvePairing(code, notice?) {
      return s.tx(async (db) => {
        const now = s.now();
        const params = [now, code.trim().toUpperCase(), now];
        const row = await first<PairingRow>(db, pgSql(sql.APPROVE), params);
        if (!row) return null;
        if (notice) {
          const target = sql.approvalNotice(row);
          const session = await ensureSessionIn(s, db, target.sessionKey, target.address);
          await insertOutbox(s, db, sql.approvalNoticeRow(target, session.session_id, notice));
        }
        return toPairing(row);
      });
    },

    listApprovedUsers(platform?) {
      return s.read(async (db) => {
        const params = [platform ?? null, platform ?? null];
        return (await all<PairingRow>(db, pgSql(sql.APPROVED_USERS), params)).map(toPairing);
      });
    },

    revokeUser(platform, userId) {
      return s.tx((db) => changes(db, pgSql(sql.REVOKE), [platform, userId]));
    },

    isUserApproved(platform, userId) {
      return s.read(
        async (db) => (await first(db, pgSql(sql.IS_APPROVED), [platform, userId])) !== undefined,
      );
    },
  };
}
