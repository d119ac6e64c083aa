/**
 * Session keys and reply addresses for Telegram chats (the glossary's "session key" in
 * docs/architecture.md). Pure.
 */
import type { ChatAddress } from "../../contract/platform.js";

/** The parts of a Telegram message that decide its chat lane. */
export interface TelegramChatRef {
  chatType: "private" | "group" | "supergroup" | "channel";
  chatId: string;
  /** `message_thread_id`: a forum topic or a reply thread. */
  threadId?: string;
  userId?: string;
}

/**
 * The session key for a Telegram message:
 * - private chat: `agent:main:telegram:dm:<chatId>` (plus `:<threadId>` for a private topic);
 * - group: `agent:main:telegram:group:<chatId>`, with `:<threadId>` for a forum topic or reply
 *   thread, and `:user:<userId>` when `groupSessionsPerUser` gives each member their own lane.
 */
export function telegramSessionKey(ref: TelegramChatRef, groupSessionsPerUser: boolean): string {
  const thread = ref.threadId === undefined ? "" : `:${ref.threadId}`;
  if (ref.chatType === "private") return `agent:main:telegram:dm:${ref.chatId}${thread}`;
  const user = groupSessionsPerUser && ref.userId !== undefined ? `:user:${ref.userId}` : "";
  return `agent:main:telegram:group:${ref.chatId}${thread}${user}`;
}

/**
 * Where the reply to a message goes: the same chat and topic, answering the user's message.
 */
export function telegramReplyAddress(ref: TelegramChatRef, messageId: string): ChatAddress {
  const address: ChatAddress = {
    platform: "telegram",
    chatId: ref.chatId,
    replyToMessageId: messageId,
  };
  if (ref.threadId !== undefined) address.threadId = ref.threadId;
  return address;
}
