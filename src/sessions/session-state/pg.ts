/**
 * SessionStore (session records) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import type { ChatAddress } from "../../contract/platform.js";
import {
  all,
  ensureSessionIn,
  first,
  type PgContext,
  resetSessionIn,
  sessionRow,
} from "../pg-shared.js";
import type { SessionStore } from "../roles.js";
import type { ResumeReason, SessionRecord } from "../store.js";
import { type SessionRow, toSession } from "../store-rows.js";

export function pgSessionState(s: PgContext): SessionStore {
  return {
    getSession(key: string): Promise<SessionRecord | null> {
      return s.read(async (db) => {
        const row = await sessionRow(db, key);
        return row ? toSession(row) : null;
      });
    },

    getSessionById(sessionId: string): Promise<SessionRecord | null> {
      return s.read(async (db) => {
        const row = await first<SessionRow>(db, "SELECT * FROM sessions WHERE session_id = $1", [
          sessionId,
        ]);
        if (row) return toSession(row);
        // A transcript left behind by /new: report it under its key with the old id.
        const t = await first<{ session_key: string }>(
          db,
          "SELECT session_key FROM transcripts WHERE session_id = $1",
          [sessionId],
        );
        if (!t) return null;
        const current = await sessionRow(db, t.session_key);
        return current ? { ...toSession(current), sessionId, resumePending: false } : null;
      });
    },

    ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord> {
      return s.tx(async (db) => toSession(await ensureSessionIn(s, db, key, origin)));
    },

    resetSession(key: string): Promise<SessionRecord> {
      return s.tx((db) => resetSessionIn(s, db, key));
    },

    setSessionModel(key: string, model: string | null): Promise<void> {
      return s.tx(async (db) => {
        await ensureSessionIn(s, db, key, null);
        await db.query("UPDATE sessions SET model = $1 WHERE key = $2", [model, key]);
      });
    },

    markResumePending(keys: string[], reason: ResumeReason): Promise<void> {
      return s.tx(async (db) => {
        await db.query(
          `UPDATE sessions SET
             resume_reason = CASE WHEN resume_pending THEN resume_reason ELSE $1 END,
             resume_marked_at = CASE WHEN resume_pending THEN resume_marked_at ELSE $2 END,
             interrupt_count = CASE WHEN resume_pending THEN interrupt_count
                                    ELSE interrupt_count + 1 END,
             resume_pending = TRUE
           WHERE key = ANY($3::text[]) AND NOT suspended`,
          [reason, s.now(), keys],
        );
      });
    },

    clearResumePending(key: string): Promise<void> {
      return s.tx(async (db) => {
        await db.query(
          `UPDATE sessions SET resume_pending = FALSE, resume_reason = NULL, resume_marked_at = NULL
             WHERE key = $1`,
          [key],
        );
      });
    },

    listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]> {
      return s.read(async (db) =>
        (
          await all<SessionRow>(
            db,
            `SELECT * FROM sessions WHERE updated_at >= $1 AND NOT resume_pending
               ORDER BY updated_at`,
            [sinceMs],
          )
        ).map(toSession),
      );
    },

    listResumePending(): Promise<SessionRecord[]> {
      return s.read(async (db) =>
        (
          await all<SessionRow>(
            db,
            "SELECT * FROM sessions WHERE resume_pending ORDER BY updated_at",
          )
        ).map(toSession),
      );
    },

    setSuspended(key: string, suspended: boolean): Promise<void> {
      return s.tx(async (db) => {
        await db.query("UPDATE sessions SET suspended = $1 WHERE key = $2", [suspended, key]);
      });
    },
  };
}
