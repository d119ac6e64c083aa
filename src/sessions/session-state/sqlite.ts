/**
 * SessionStore (session records) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */
import type { ChatAddress } from "../../contract/platform.js";
import type { SessionStore } from "../roles.js";
import {
  ensureSessionSync,
  resetSessionSync,
  type SqliteContext,
  sessionRow,
} from "../sqlite-shared.js";
import type { ResumeReason, SessionRecord } from "../store.js";
import { type SessionRow, toSession } from "../store-rows.js";

export function sqliteSessionState(s: SqliteContext): SessionStore {
  return {
    getSession(key: string): Promise<SessionRecord | null> {
      return s.read(() => {
        const row = sessionRow(s, key);
        return row ? toSession(row) : null;
      });
    },

    getSessionById(sessionId: string): Promise<SessionRecord | null> {
      return s.read(() => {
        const row = s.stmt("SELECT * FROM sessions WHERE session_id = ?").get(sessionId) as
          | SessionRow
          | undefined;
        if (row) return toSession(row);
        // A transcript left behind by /new: report it under its key with the old id.
        const t = s.stmt("SELECT * FROM transcripts WHERE session_id = ?").get(sessionId) as
          | { session_key: string; created_at: number }
          | undefined;
        if (!t) return null;
        const current = sessionRow(s, t.session_key);
        return current ? { ...toSession(current), sessionId, resumePending: false } : null;
      });
    },

    ensureSession(key: string, origin: ChatAddress | null): Promise<SessionRecord> {
      return s.tx(() => toSession(ensureSessionSync(s, key, origin)));
    },

    resetSession(key: string): Promise<SessionRecord> {
      return s.tx(() => resetSessionSync(s, key));
    },

    setSessionModel(key: string, model: string | null): Promise<void> {
      return s.tx(() => {
        ensureSessionSync(s, key, null);
        s.stmt("UPDATE sessions SET model = ? WHERE key = ?").run(model, key);
      });
    },

    markResumePending(keys: string[], reason: ResumeReason): Promise<void> {
      return s.tx(() => {
        const now = s.now();
        const update = s.stmt(
          `UPDATE sessions SET
             resume_reason = CASE WHEN resume_pending = 1 THEN resume_reason ELSE ? END,
             resume_marked_at = CASE WHEN resume_pending = 1 THEN resume_marked_at ELSE ? END,
             interrupt_count = CASE WHEN resume_pending = 1 THEN interrupt_count ELSE interrupt_count + 1 END,
             resume_pending = 1
           WHERE key = ? AND suspended = 0`,
        );
        for (const key of keys) update.run(reason, now, key);
      });
    },

    clearResumePending(key: string): Promise<void> {
      return s.tx(() => {
        s.stmt(
          "UPDATE sessions SET resume_pending = 0, resume_reason = NULL, resume_marked_at = NULL WHERE key = ?",
        ).run(key);
      });
    },

    listSessionsActiveSince(sinceMs: number): Promise<SessionRecord[]> {
      return s.read(() =>
        (
          s
            .stmt(
              "SELECT * FROM sessions WHERE updated_at >= ? AND resume_pending = 0 ORDER BY updated_at",
            )
            .all(sinceMs) as SessionRow[]
        ).map(toSession),
      );
    },

    listResumePending(): Promise<SessionRecord[]> {
      return s.read(() =>
        (
          s
            .stmt("SELECT * FROM sessions WHERE resume_pending = 1 ORDER BY updated_at")
            .all() as SessionRow[]
        ).map(toSession),
      );
    },

    setSuspended(key: string, suspended: boolean): Promise<void> {
      return s.tx(() => {
        s.stmt("UPDATE sessions SET suspended = ? WHERE key = ?").run(suspended ? 1 : 0, key);
      });
    },
  };
}
