/**
 * Files on Telegram: downloading what a user sent (`getFile`, then the file URL under the
 * configured `api_root`, or the local path a self-hosted Bot API server in local mode returns) and
 * sending what the agent sends (`sendPhoto` for images Telegram takes as photos, `sendDocument`
 * for everything else and for a photo Telegram refuses).
 */
import { readFile } from "node:fs/promises";
import { isAbsolute } from "node:path";
import { type Api, GrammyError, InputFile } from "grammy";
import type { Logger } from "pino";
import {
  type ChatAddress,
  FileTooLargeError,
  type InboundAttachment,
  type OutboundFile,
} from "../../contract/platform.js";
import { backoffMs } from "../../lib/net.js";
import { RECONNECT_JITTER } from "../kit/connection-state.js";
import { describeTelegramError, type RetryPolicy, sleep, withRetry } from "./send.js";

/** Telegram's limits for uploads by a bot. */
const MAX_PHOTO_BYTES = 10 * 1_048_576;
export const MAX_CAPTION_CHARS = 1024;
/** Attempts at the file URL itself (getFile has its own retry policy). */
const DOWNLOAD_ATTEMPTS = 3;

export interface TelegramFilesOptions {
  api: Api;
  token: string;
  apiRoot: string;
  policy: RetryPolicy;
  logger: Logger;
  /** Aborted when the adapter stops. */
  stopSignal: AbortSignal;
}

export class TelegramFiles {
  constructor(private readonly options: TelegramFilesOptions) {}

  /** Downloads a user's file; throws FileTooLargeError past `maxBytes`, or why it failed. */
  async download(
    attachment: InboundAttachment,
    maxBytes: number,
    turnSignal: AbortSignal,
  ): Promise<Buffer> {
    if (attachment.size !== undefined && attachment.size > maxBytes) {
      throw new FileTooLargeError(maxBytes, attachment.size);
    }
    const signal = AbortSignal.any([turnSignal, this.options.stopSignal]);
    const { api, policy, logger } = this.options;
    let file: Awaited<ReturnType<Api["getFile"]>>;
    try {
      file = await withRetry(
        () => api.getFile(attachment.ref, signal as Parameters<Api["getFile"]>[1]),
        { policy, signal, logger, method: "getFile" },
      );
    } catch (err) {
      // The cloud Bot API refuses files over 20 MB whatever the message said.
      if (err instanceof GrammyError && /too big/i.test(err.description)) {
        throw new FileTooLargeError(maxBytes, attachment.size);
      }
      throw new Error(`Telegram getFile failed: ${describeTelegramError(err)}`, { cause: err });
    }
    if (file.file_size !== undefined && file.file_size > maxBytes) {
      throw new FileTooLargeError(maxBytes, file.file_size);
    }
    if (!file.file_path) throw new Error("Telegram gave no file path for this file");
    // A self-hosted Bot API server in local mode hands out the file's absolute path.
    if (isAbsolute(file.file_path)) return readFile(file.file_path);
    const root = this.options.apiRoot.replace(/\/+$/, "");
    return this.fetchWithRetry(
      `${root}/file/bot${this.options.token}/${file.file_path}`,
      maxBytes,
      signal,
    );
  }

  private async fetchWithRetry(
    url: string,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fetchCapped(url, maxBytes, signal);
      } catch (err) {
        if (err instanceof FileTooLargeError || signal.aborted || attempt >= DOWNLOAD_ATTEMPTS) {
          throw err;
        }
        const delayMs = backoffMs(
          attempt,
          this.options.policy.baseDelayMs,
          5_000,
          RECONNECT_JITTER,
        );
        // The URL holds the bot token: log only what went wrong.
        this.options.logger.warn(
          { attempt, delayMs, error: (err as Error).message },
          "telegram file download failed, retrying",
        );
        await sleep(delayMs, signal);
      }
    }
  }

  /** Sends a file to a chat with its caption (cut to Telegram's limit), as photo or document. */
  async send(address: ChatAddress, file: OutboundFile, caption: string): Promise<void> {
    const other = {
      ...(caption && { caption: cutCaption(caption) }),
      ...(address.threadId !== undefined ? { message_thread_id: Number(address.threadId) } : {}),
      ...(address.replyToMessageId !== undefined
        ? {
            reply_parameters: {
              message_id: Number(address.replyToMessageId),
              allow_sending_without_reply: true,
            },
          }
        : {}),
    };
    const { api, policy, logger, stopSignal: signal } = this.options;
    const input = () => new InputFile(file.path, file.name);
    if (isPhoto(file)) {
      try {
        await withRetry(() => api.sendPhoto(address.chatId, input(), other), {
          policy,
          signal,
          logger,
          method: "sendPhoto",
        });
        return;
      } catch (err) {
        // Dimensions or format Telegram will not show as a photo: it still goes, as a file.
        if (!(err instanceof GrammyError && err.error_code === 400)) throw err;
        logger.warn({ error: describeTelegramError(err) }, "photo refused, sending as document");
      }
    }
    await withRetry(() => api.sendDocument(address.chatId, input(), other), {
      policy,
      signal,
      logger,
      method: "sendDocument",
    });
  }
}

function isPhoto(file: OutboundFile): boolean {
  return /^image\/(jpeg|png|webp|gif)$/.test(file.mime) && file.size <= MAX_PHOTO_BYTES;
}

function cutCaption(caption: string): string {
  const chars = [...caption];
  return chars.length <= MAX_CAPTION_CHARS
    ? caption
    : `${chars.slice(0, MAX_CAPTION_CHARS - 1).join("")}…`;
}

/** GETs `url` into memory, refusing bodies over `maxBytes` (declared or actual). */
async function fetchCapped(url: string, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const response = await fetch(url, { signal });
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    throw new Error(`file download answered HTTP ${response.status}`);
  }
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body.cancel();
    throw new FileTooLargeError(maxBytes, declared);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response.body) {
    total += chunk.length;
    if (total > maxBytes) throw new FileTooLargeError(maxBytes);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}
