/**
 * PairingStore (pairing) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ChatAddress } from "../../contract/platform.js";
import type { PairingStore } from "../roles.js";
import { newPairingCode, noticeSessionKey } from "../session-id.js";
import { ensureSessionSync, insertOutbox, type SqliteContext } from "../sqlite-shared.js";
import type { PairingRequest, PairingRequestInput } from "../store.js";
import { type PairingRow, toPairing } from "../store-rows.js";

export function sqlitePairing(s: SqliteContext): PairingStore {
  return {
    requestPairing(input: PairingRequestInput): Promise<PairingRequest | null> {
      return s.tx(() => {
        const now = s.now();
        const live = s
          .stmt(
            "SELECT * FROM pairing WHERE platform = ? AND approved_at IS NULL AND expires_at > ? ORDER BY created_at",
          )
          .all(input.platform, now) as PairingRow[];
        const mine = live.find((r) => r.user_id === input.userId);
        if (mine) return toPairing(mine);
        if (live.length >= input.maxPending) return null;
        const code = newPairingCode();
        s.stmt(
          `INSERT INTO pairing (code, platform, user_id, user_name, chat_id, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?)`,
        ).run(
          code,
          input.platform,
          input.userId,
          input.userName,
          input.chatId,
          now,
          now + input.ttlMs,
        );
        return toPairing(s.stmt("SELECT * FROM pairing WHERE code = ?").get(code) as PairingRow);
      });
    },

    listPairingRequests(platform?: string): Promise<PairingRequest[]> {
      return s.read(() =>
        (
          s
            .stmt(
              `SELECT * FROM pairing WHERE approved_at IS NULL AND expires_at > ? AND (? IS NULL OR platform = ?)
               ORDER BY created_at`,
            )
            .all(s.now(), platform ?? null, platform ?? null) as PairingRow[]
        ).map(toPairing),
      );
    },

    approvePairing(code: string, notice?: string): Promise<PairingRequest | null> {
      return s.tx(() => {
        const now = s.now();
        const row = s
          .stmt("SELECT * FROM pairing WHERE code = ? AND approved_at IS NULL AND expires_at > ?")
          .get(code.trim().toUpperCase(), now) as PairingRow | undefined;
        if (!row) return null;
        s.stmt("UPDATE pairing SET approved_at = ? WHERE code = ?").run(now, row.code);
        if (notice) {
          const address: ChatAddress = { platform: row.platform, chatId: row.chat_id };
          const key = noticeSessionKey(address);
          const session = ensureSessionSync(s, key, address);
          insertOutbox(s, {
            sessionKey: key,
            sessionId: session.session_id,
            turnId: null,
            address,
            text: notice,
            kind: "notice",
          });
        }
        return toPairing({ ...row, approved_at: now });
      });
    },

    listApprovedUsers(platform?: string): Promise<PairingRequest[]> {
      return s.read(() =>
        (
          s
            .stmt(
              `SELECT * FROM pairing p WHERE approved_at IS NOT NULL AND (? IS NULL OR platform = ?)
               AND approved_at = (SELECT MAX(approved_at) FROM pairing q
                                   WHERE q.platform = p.platform AND q.user_id = p.user_id)
               ORDER BY approved_at`,
            )
            .all(platform ?? null, platform ?? null) as PairingRow[]
        ).map(toPairing),
      );
    },

    revokeUser(platform: string, userId: string): Promise<number> {
      return s.tx(
        () =>
          s
            .stmt(
              "DELETE FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL",
            )
            .run(platform, userId).changes,
      );
    },

    isUserApproved(platform: string, userId: string): Promise<boolean> {
      return s.read(
        () =>
          s
            .stmt(
              "SELECT 1 FROM pairing WHERE platform = ? AND user_id = ? AND approved_at IS NOT NULL LIMIT 1",
            )
            .get(platform, userId) !== undefined,
      );
    },
  };
}
