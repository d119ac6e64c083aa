import { randomBytes } from "node:crypto";
import type { ChatAddress } from "../contract/platform.js";

/** Session keys of Keel's own bookkeeping (notice lanes), hidden from `keel sessions list`. */
export const INTERNAL_KEY_PREFIX = "system:";

/** The lane of lifecycle and operator notices to one chat. */
export function noticeSessionKey(address: ChatAddress): string {
  return `${INTERNAL_KEY_PREFIX}notices:${address.platform}:${address.chatId}`;
}

/**
 * A new transcript id: sortable by creation time, readable in logs (`20261125-215344-3fa9c1d2e7b0`).
 * Six random bytes: with three, a gateway creating a few hundred sessions a second (stateless `/v1`
 * clients) drew the same id twice within minutes, and the second session's insert failed.
 */
export function newSessionId(now: number): string {
  const iso = new Date(now).toISOString();
  const stamp = `${iso.slice(0, 10).replaceAll("-", "")}-${iso.slice(11, 19).replaceAll(":", "")}`;
  return `${stamp}-${randomBytes(6).toString("hex")}`;
}

/** A pairing code: 8 characters from an alphabet without look-alikes (0/O, 1/I/L). */
export function newPairingCode(): string {
  const alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";
  const bytes = randomBytes(8);
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("");
}
