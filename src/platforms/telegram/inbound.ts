/**
 * Telegram message to InboundMessage. Pure: the adapter decides access and hands the result to
 * the sink.
 */
import type { Message } from "grammy/types";
import type { InboundAttachment, InboundMessage } from "../../contract/platform.js";
import { cutFileName } from "../../lib/utf8.js";
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
 * The files of a message as references (nothing is downloaded here): the largest size of a
 * photo, a document, a voice note or an audio file.
 */
export function attachmentsOf(message: Message): InboundAttachment[] {
  const out: InboundAttachment[] = [];
  const sized = (size: number | undefined) => (size === undefined ? {} : { size });
  if (message.photo && message.photo.length > 0) {
    const largest = message.photo.reduce((best, p) =>
      p.width * p.height > best.width * best.height ? p : best,
    );
    out.push({
      kind: "photo",
      ref: largest.file_id,
      name: `photo-${message.message_id}.jpg`,
      mime: "image/jpeg",
      ...sized(largest.file_size),
    });
  }
  // Videos and animations are kept as documents: the agent gets the file, never silence.
  const files = [
    ["document", message.document],
    ["voice", message.voice],
    ["audio", message.audio],
    ["document", message.video],
    ["document", message.animation],
    ["document", message.video_note],
  ] as const;
  for (const [kind, file] of files) {
    if (!file) continue;
    const name = "file_name" in file ? file.file_name : undefined;
    const mime = "mime_type" in file ? file.mime_type : "video/mp4";
    out.push({
      kind,
      ref: file.file_id,
      name: name ? cutFileName(name) : defaultName(kind, message.message_id, mime),
      ...(mime !== undefined && { mime }),
      ...sized(file.file_size),
    });
  }
  return out;
}

function defaultName(kind: string, messageId: number, mime: string | undefined): string {
  const ext = kind === "voice" ? "ogg" : (mime?.split("/")[1]?.replace(/[^a-z0-9]/gi, "") ?? "bin");
  return `${kind}-${messageId}.${ext}`;
}

/**
 * Builds the InboundMessage for a message with text or files (a caption counts as text), or null
 * for messages Keel does not take (neither text nor a file Keel handles, no sender, sent by a bot,
 * or a command for another bot).
 * The platform message id is Telegram's `message_id`, unique per chat, so a redelivered update
 * maps to the same id.
 */
export function toInboundMessage(
  message: Message,
  options: { groupSessionsPerUser: boolean; botUsername: string },
): InboundMessage | null {
  // A sticker is an emoji in picture form: its emoji stands for it.
  const sticker = message.sticker
    ? `[sticker ${message.sticker.emoji ?? ""}]`.replace(" ]", "]")
    : "";
  const raw = message.text ?? message.caption ?? sticker;
  const attachments = attachmentsOf(message);
  if ((!raw && attachments.length === 0) || !message.from || message.from.is_bot) return null;
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
  if (attachments.length > 0) inbound.attachments = attachments;
  if (ref.userId !== undefined) inbound.senderId = ref.userId;
  const name = senderName(message);
  if (name !== undefined) inbound.senderName = name;
  return inbound;
}
