/**
 * PairingStore (pairing) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import type { ChatAddress } from "../../contract/platform.js";
import {
  all,
  changes,
  ensureSessionIn,
  first,
  insertOutbox,
  type PgContext,
} from "../pg-shared.js";
import type { PairingStore } from "../roles.js";
import { newPairingCode, noticeSessionKey } from "../session-id.js";
import type { PairingRequest, PairingRequestInput } from "../store.js";
import { type PairingRow, toPairing } from "../store-rows.js";

export function pgPairing(s: PgContext): PairingStore {
  return {
    requestPairing(input: PairingRequestInput): Promise<PairingRequest | null> {
      return s.tx(async (db) => {
        // The cap counts a platform's live codes: two instances must not both see room for one more.
        await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
          `keel:pairing:${input.platform}`,
        ]);
        const now = s.now();
        const live = await all<PairingRow>(
          db,
          `SELECT * FROM pairing WHERE platform = $1 AND approved_at IS NULL AND expires_at > $2
             ORDER BY created_at`,
          [input.platform, now],
        );
        const mine = live.find((r) => r.user_id === input.userId);
        if (mine) return toPairing(mine);
        if (live.length >= input.maxPending) return null;
        const row = await first<PairingRow>(
          db,
          `INSERT INTO pairing (code, platform, user_id, user_name, chat_id, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
          [
            newPairingCode(),
            input.platform,
            input.userId,
            input.userName,
            input.chatId,
            now,
            now + input.ttlMs,
          ],
        );
        return toPairing(row!);
      });
    },

    listPairingRequests(platform?: string): Promise<PairingRequest[]> {
      return s.read(async (db) =>
        (
          await all<PairingRow>(
            db,
            `SELECT * FROM pairing WHERE approved_at IS NULL AND expires_at > $1
               AND ($2::text IS NULL OR platform = $2) ORDER BY created_at`,
            [s.now(), platform ?? null],
          )
        ).map(toPairing),
      );
    },

    approvePairing(code: string, notice?: string): Promise<PairingRequest | null> {
      return s.tx(async (db) => {
        const now = s.now();
        const row = await first<PairingRow>(
          db,
          `UPDATE pairing SET approved_at = $2
             WHERE code = $1 AND approved_at IS NULL AND expires_at > $2 RETURNING *`,
          [code.trim().toUpperCase(), now],
        );
        if (!row) return null;
        if (notice) {
          const address: ChatAddress = { platform: row.platform, chatId: row.chat_id };
          const key = noticeSessionKey(address);
          const session = await ensureSessionIn(s, db, key, address);
          await insertOutbox(s, db, {
            sessionKey: key,
            sessionId: session.session_id,
            turnId: null,
            address,
            text: notice,
            kind: "notice",
          });
        }
        return toPairing(row);
      });
    },

    listApprovedUsers(platform?: string): Promise<PairingRequest[]> {
      return s.read(async (db) =>
        (
          await all<PairingRow>(
            db,
            `SELECT * FROM pairing p WHERE approved_at IS NOT NULL
               AND ($1::text IS NULL OR platform = $1)
               AND approved_at = (SELECT MAX(approved_at) FROM pairing q
                                   WHERE q.platform = p.platform AND q.user_id = p.user_id)
               ORDER BY approved_at`,
            [platform ?? null],
          )
        ).map(toPairing),
      );
    },

    revokeUser(platform: string, userId: string): Promise<number> {
      return s.tx((db) =>
        changes(
          db,
          "DELETE FROM pairing WHERE platform = $1 AND user_id = $2 AND approved_at IS NOT NULL",
          [platform, userId],
        ),
      );
    },

    isUserApproved(platform: string, userId: string): Promise<boolean> {
      return s.read(
        async (db) =>
          (await first(
            db,
            `SELECT 1 FROM pairing WHERE platform = $1 AND user_id = $2 AND approved_at IS NOT NULL
               LIMIT 1`,
            [platform, userId],
          )) !== undefined,
      );
    },
  };
}
