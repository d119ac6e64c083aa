/**
 * PairingStore (pairing) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`. The statements are in
 * pairing/statements.ts, shared with Postgres.
 */
import type { PairingStore } from "../roles.js";
import { newPairingCode } from "../session-id.js";
import { ensureSessionSync, insertOutbox, type SqliteContext } from "../sqlite-shared.js";
import { type PairingRow, toPairing } from "../store-rows.js";
import * as sql from "./statements.js";

export function sqlitePairing(s: SqliteContext): PairingStore {
  return {
    requestPairing(input) {
      return s.tx(() => {
        const now = s.now();
        const live = s.stmt(sql.LIVE_CODES).all(input.platform, now) as PairingRow[];
        const mine = live.find((r) => r.user_id === input.userId);
        if (mine) return toPairing(mine);
        if (live.length >= input.maxPending) return null;
        const params = sql.codeParams(newPairingCode(), input, now);
        return toPairing(s.stmt(sql.INSERT_CODE).get(...params) as PairingRow);
      });
    },

    listPairingRequests(platform?) {
      return s.read(() => {
        const params = [s.now(), platform ?? null, platform ?? null];
        return (s.stmt(sql.LIST_REQUESTS).all(...params) as PairingRow[]).map(toPairing);
      });
    },

    approvePairing(code, notice?) {
      return s.tx(() => {
        const now = s.now();
        const params = [now, code.trim().toUpperCase(), now];
        const row = s.stmt(sql.APPROVE).get(...params) as PairingRow | undefined;
        if (!row) return null;
        if (notice) {
          const target = sql.approvalNotice(row);
          const session = ensureSessionSync(s, target.sessionKey, target.address);
          insertOutbox(s, sql.approvalNoticeRow(target, session.session_id, notice));
        }
        return toPairing(row);
      });
    },

    listApprovedUsers(platform?) {
      return s.read(() => {
        const params = [platform ?? null, platform ?? null];
        return (s.stmt(sql.APPROVED_USERS).all(...params) as PairingRow[]).map(toPairing);
      });
    },

    revokeUser(platform, userId) {
      return s.tx(() => s.stmt(sql.REVOKE).run(platform, userId).changes);
    },

    isUserApproved(platform, userId) {
      return s.read(() => s.stmt(sql.IS_APPROVED).get(platform, userId) !== undefined);
    },
  };
}
