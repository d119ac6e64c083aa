/**
 * PlatformDataStore (platform adapters' data) on SQLite; what each method promises is in roles.ts.
 * Writes run in the group commit (`s.tx`), reads through `s.read`.
 */

import type { PlatformDataStore } from "../roles.js";
import type { SqliteContext } from "../sqlite-shared.js";
import type { RecentChat } from "../store.js";
import { type RecentChatRow, toRecentChat } from "../store-rows.js";

export function sqlitePlatformData(s: SqliteContext): PlatformDataStore {
  return {
    getPlatformState(key: string): Promise<unknown> {
      return s.read(() => {
        const row = s.stmt("SELECT value FROM platform_state WHERE key = ?").get(key) as
          | { value: string }
          | undefined;
        return row ? (JSON.parse(row.value) as unknown) : null;
      });
    },

    setPlatformState(key: string, value: unknown): Promise<void> {
      return s.tx(() => {
        if (value === null) {
          s.stmt("DELETE FROM platform_state WHERE key = ?").run(key);
          return;
        }
        s.stmt(
          `INSERT INTO platform_state (key, value, updated_at) VALUES (?, ?, ?)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
        ).run(key, JSON.stringify(value), s.now());
      });
    },

    listRecentChats(platform: string, sinceMs: number): Promise<RecentChat[]> {
      return s.read(() => {
        const rows = s
          .stmt(
            `SELECT i.chat_id, i.platform_message_id, i.received_at FROM inbox i
             JOIN (SELECT MAX(id) AS id FROM inbox WHERE platform = ? AND received_at >= ?
                     GROUP BY chat_id) latest ON latest.id = i.id
             ORDER BY i.id`,
          )
          .all(platform, sinceMs) as RecentChatRow[];
        return rows.map(toRecentChat);
      });
    },

    appendChannelEvent(channel: string, payload: unknown): Promise<number> {
      return s.tx(() =>
        Number(
          s
            .stmt("INSERT INTO channel_events (channel, payload, created_at) VALUES (?, ?, ?)")
            .run(channel, JSON.stringify(payload), s.now()).lastInsertRowid,
        ),
      );
    },

    listChannelEvents(channel: string, afterSeq: number, limit = 1000) {
      return s.read(() =>
        (
          s
            .stmt(
              "SELECT seq, payload FROM channel_events WHERE channel = ? AND seq > ? ORDER BY seq LIMIT ?",
            )
            .all(channel, afterSeq, limit) as { seq: number; payload: string }[]
        ).map((r) => ({ seq: r.seq, payload: JSON.parse(r.payload) as unknown })),
      );
    },
  };
}
