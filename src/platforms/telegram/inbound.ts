/**
 * Telegram message to InboundMessage. Pure: the adapter decides access and hands the result to
 * the sink.
 */
import type { Message } from "grammy/types";
import type { InboundMessage } from "../platform.js";
import { type TelegramChatRef, telegramReplyAddress, telegramSessionKey } from "./session-key.js";

/** The chat facts of a message: chat type and id, thread, sender. */
export function chatRefOf(message: Message): TelegramChatRef {
  const ref: TelegramChatRef = { chatType: message.chat.type, chatId: String(message.chat.id) };
  if (message.message_thread_id !== undefined) ref.threadId = String(message.message_thread_id);
  if (message.from) ref.userId = String(message.from.id);
  return ref;
}

/**
 * Drops our own `@botname` from a leading command (`/new@keel_bot` -> `/new`). Returns null when
 * the command names another bot, so it is not ours to answer.
 */
export function normalizeCommand(text: string, botUsername: string): string | null {
  const match = /^\/([A-Za-z0-9_]+)@([A-Za-z0-9_]+)/.exec(text);
  if (!match) return text;
  if (match[2]!.toLowerCase() !== botUsername.toLowerCase()) return null;
  return `/${match[1]}${text.slice(match[0].length)}`;
}

function senderName(message: Message): string | undefined {
  const from = message.from;
  if (!from) return undefined;
  const full = [from.first_name, from.last_name].filter(Boolean).join(" ");
  return full || from.username || undefined;
}

/**
 * Builds the InboundMessage for a text message (a caption counts as text), or null for messages
 * Keel does not take (no text, no sender, sent by a bot, or a command for another bot).
 * The platform message id is Telegram's `message_id`, unique per chat, so a redelivered update
 * maps to the same id.
 */
export function toInboundMessage(
  message: Message,
  options: { groupSessionsPerUser: boolean; botUsername: string },
): InboundMessage | null {
  const raw = message.text ?? message.caption;
  if (!raw || !message.from || message.from.is_bot) return null;
  const text = normalizeCommand(raw, options.botUsername);
  if (text === null) return null;
  const ref = chatRefOf(message);
  const address = telegramReplyAddress(ref, String(message.message_id));
  // Only forum topics take message_thread_id on send; in a reply thread the reply target keeps
  // the answer in place.
  if (!message.is_topic_message) delete address.threadId;
  const inbound: InboundMessage = {
    platform: "telegram",
    chatId: ref.chatId,
    platformMessageId: String(message.message_id),
    sessionKey: telegramSessionKey(ref, options.groupSessionsPerUser),
    text,
    address,
  };
  if (ref.userId !== undefined) inbound.senderId = ref.userId;
  const name = senderName(message);
  if (name !== undefined) inbound.senderName = name;
  return inbound;
}
