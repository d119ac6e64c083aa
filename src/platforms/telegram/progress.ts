/**
 * Telegram's side of progress people can see (progress-view.ts, stream-editor.ts): previews
 * through sendMessage/editMessageText at Telegram's pace (1 s per private chat, 3 s per group),
 * finals formatted (HTML) as every reply is and edited into the previews.
 */
import { type Api, GrammyError } from "grammy";
import type { ChatAddress } from "../../contract/platform.js";
import { type ProgressContext, type ProgressSettings, ProgressView } from "../progress-view.js";
import { markdownToTelegramHtml, splitMessage, TELEGRAM_MESSAGE_LIMIT } from "./format.js";
import { describeTelegramError, isNotModified, type TelegramSender } from "./send.js";

export type { StreamStore } from "../progress-view.js";

export interface TelegramProgressSettings extends ProgressSettings {
  /** Least time between calls in a private chat, and in a group (Telegram's limits). */
  privateIntervalMs?: number;
  groupIntervalMs?: number;
}

/** The progress view of the Telegram adapter. */
export function createTelegramProgress(
  api: Api,
  sender: TelegramSender,
  context: ProgressContext<TelegramProgressSettings>,
): ProgressView {
  const { settings } = context;
  return new ProgressView(context, {
    platform: "telegram",
    minIntervalMs: (address) =>
      isGroup(address) ? (settings.groupIntervalMs ?? 3000) : (settings.privateIntervalMs ?? 1000),
    preview: {
      limit: TELEGRAM_MESSAGE_LIMIT,
      send: async (address, text, first) => {
        const sent = await api.sendMessage(address.chatId, text, sendOptions(address, first));
        return String(sent.message_id);
      },
      edit: async (address, messageId, text) => {
        try {
          await api.editMessageText(address.chatId, Number(messageId), text);
        } catch (err) {
          if (!isNotModified(err)) throw err;
        }
      },
      retryAfterMs: (err) =>
        err instanceof GrammyError && err.error_code === 429
          ? (err.parameters.retry_after ?? 1) * 1000
          : null,
    },
    final: (paced) => ({
      sendPiece: (address, piece, first) =>
        paced(address, async () => String(await sender.sendPiece(address, piece, first))),
      editPiece: (address, messageId, piece) =>
        paced(address, () => sender.editText(address, messageId, piece, true)),
      editPlain: (address, messageId, text) =>
        paced(address, () => sender.editText(address, messageId, text, false)),
      remove: (address, messageId) => paced(address, () => sender.remove(address, messageId)),
    }),
    pieces: (text) => splitMessage(markdownToTelegramHtml(text)),
    send: (reply) => sender.deliver(reply),
    describeError: describeTelegramError,
  });
}

function isGroup(address: ChatAddress): boolean {
  return address.chatId.startsWith("-");
}

function sendOptions(address: ChatAddress, first: boolean) {
  const replyTo =
    first && address.replyToMessageId !== undefined ? Number(address.replyToMessageId) : undefined;
  return {
    ...(address.threadId !== undefined ? { message_thread_id: Number(address.threadId) } : {}),
    ...(replyTo !== undefined
      ? { reply_parameters: { message_id: replyTo, allow_sending_without_reply: true } }
      : {}),
  };
}
