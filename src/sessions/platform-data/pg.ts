/**
 * PlatformDataStore (platform adapters' data) on Postgres; what each method promises is in roles.ts.
 * Writes run in one transaction each (`s.tx`), reads in one snapshot (`s.read`).
 */
import { all, first, type PgContext } from "../pg-shared.js";
import type { PlatformDataStore } from "../roles.js";
import type { RecentChat } from "../store.js";
import { type RecentChatRow, toRecentChat } from "../store-rows.js";

export function pgPlatformData(s: PgContext): PlatformDataStore {
  return {
    getPlatformState(key: string): Promise<unknown> {
      return s.read(async (db) => {
        const row = await first<{ value: string }>(
          db,
          "SELECT value FROM platform_state WHERE key = $1",
          [key],
        );
        return row ? (JSON.parse(row.value) as unknown) : null;
      });
    },

    setPlatformState(key: string, value: unknown): Promise<void> {
      return s.tx(async (db) => {
        if (value === null) {
          await db.query("DELETE FROM platform_state WHERE key = $1", [key]);
          return;
        }
        await db.query(
          `INSERT INTO platform_state (key, value, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
          [key, JSON.stringify(value), s.now()],
        );
      });
    },

    listRecentChats(platform: string, sinceMs: number): Promise<RecentChat[]> {
      return s.read(async (db) => {
        const rows = await all<RecentChatRow>(
          db,
          `SELECT i.chat_id, i.platform_message_id, i.received_at FROM inbox i
             JOIN (SELECT MAX(id) AS id FROM inbox WHERE platform = $1 AND received_at >= $2
                     GROUP BY chat_id) latest ON latest.id = i.id
             ORDER BY i.id`,
          [platform, sinceMs],
        );
        return rows.map(toRecentChat);
      });
    },

    appendChannelEvent(channel: string, payload: unknown): Promise<number> {
      return s.tx(async (db) => {
        const row = await first<{ seq: number }>(
          db,
          "INSERT INTO channel_events (channel, payload, created_at) VALUES ($1, $2, $3) RETURNING seq",
          [channel, JSON.stringify(payload), s.now()],
        );
        return row!.seq;
      });
    },

    listChannelEvents(
      channel: string,
      afterSeq: number,
      limit = 1000,
    ): Promise<{ seq: number; payload: unknown }[]> {
      return s.read(async (db) =>
        (
          await all<{ seq: number; payload: string }>(
            db,
            `SELECT seq, payload FROM channel_events WHERE channel = $1 AND seq > $2
               ORDER BY seq LIMIT $3`,
            [channel, afterSeq, limit],
          )
        ).map((r) => ({ seq: r.seq, payload: JSON.parse(r.payload) as unknown })),
      );
    },
  };
}
