/**
 * Turns a message's files into what the model reads, once. Each expensive step (the download,
 * the transcription) is recorded in the store before the turn goes on, together with any notice
 * for the user; a turn that runs again after a crash reuses the record instead of repeating the
 * step. Nothing is dropped silently: a file that cannot be handled gets a notice naming it, and
 * the model is told about it too.
 */
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { UserContent } from "../agent/content.js";
import {
  formatSize,
  isImageMime,
  isTextMime,
  mimeOf,
  safeFileName,
} from "../agent/media/file-kind.js";
import type { Transcriber } from "../agent/media/transcriber.js";
import type { UserContentPart } from "../agent/types.js";
import { FileTooLargeError, type InboundAttachment } from "../contract/platform.js";
import type { CrashPoint } from "../lib/crash-point.js";
import { MAX_NAME_BYTES } from "../lib/utf8.js";
import type { InboxItem, InboxStore, OutboxStore } from "../sessions/store.js";

/** A download is written under its name plus this, then renamed. */
const PART_SUFFIX = ".part";

/** Text files up to this size are shown to the model inline, besides their path. */
export const INLINE_TEXT_BYTES = 32 * 1024;
/** A transcript echoed to the chat is cut to this many characters. */
const ECHO_CHARS = 300;

export interface MediaSettings {
  /** Inbound files go to `<inboxRoot>/<session id>/` (`workspace/inbox`). */
  inboxRoot: string;
  maxFileBytes: number;
  vision: boolean;
  showTranscripts: boolean;
  /** Downloads a file from its platform (the adapter's fetchFile). */
  fetchFile(
    platform: string,
    attachment: InboundAttachment,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer>;
  /** Null when no transcription endpoint is configured. */
  transcribe: Transcriber | null;
}

export interface MediaContext {
  store: InboxStore & OutboxStore;
  media: MediaSettings;
  logger: Logger;
  crashPoint: CrashPoint;
}

type Download =
  | { ok: true; path: string; size: number; mime: string }
  | { ok: false; reason: "too_large" | "failed"; detail: string };
type Transcript = { ok: true; text: string } | { ok: false; detail: string };

/**
 * The user message content for `item`: its text plus, per file, an image part or a note with
 * the saved path (and a transcript, or a small text file's content). Null when `signal` aborted
 * before every step was recorded: the caller leaves the message for later.
 */
export async function prepareMessageContent(
  ctx: MediaContext,
  item: InboxItem,
  signal: AbortSignal,
): Promise<UserContent | null> {
  const attachments = item.attachments ?? [];
  const steps = await ctx.store.listMediaSteps(item.id);
  const parts: UserContentPart[] = item.text ? [{ type: "text", text: item.text }] : [];
  const note = (text: string) => parts.push({ type: "text", text });
  for (const [index, attachment] of attachments.entries()) {
    const name = attachment.name ?? `${attachment.kind} ${index + 1}`;
    // An image by https URL (from an API client) goes to the model as it is: Keel fetches
    // nothing on a client's behalf.
    if (attachment.ref.startsWith("https://")) {
      parts.push({ type: "image_url", image_url: { url: attachment.ref } });
      continue;
    }
    const download = await step<Download>(ctx, item, steps, `download:${index}`, async () => {
      const result = await downloadOne(ctx, item, index, attachment, signal);
      return { result, notice: result.ok ? undefined : downloadNotice(name, result, ctx.media) };
    });
    if (!download) return null;
    if (!download.ok) {
      note(`[The user sent ${name}, which Keel could not take: ${download.detail}.]`);
      continue;
    }
    if (attachment.kind === "voice" || attachment.kind === "audio") {
      const transcript = await step<Transcript>(
        ctx,
        item,
        steps,
        `transcript:${index}`,
        async () => {
          const result = await transcribeOne(ctx, download, name, signal);
          return { result, notice: transcriptNotice(name, result, download.path, ctx.media) };
        },
      );
      if (!transcript) return null;
      note(
        transcript.ok
          ? `[Transcript of a ${attachment.kind === "voice" ? "voice note" : "audio file"} from the user (machine-generated, may contain errors; audio saved at ${download.path}):]\n${transcript.text}`
          : `[The user sent ${name} (saved at ${download.path}); it could not be transcribed: ${transcript.detail}.]`,
      );
      continue;
    }
    if (isImageMime(download.mime)) {
      parts.push({ type: "saved_image", path: download.path, mime: download.mime });
      note(`[Image ${name} saved at ${download.path}.]`);
      if (!ctx.media.vision) await tellNoVision(ctx, item);
      continue;
    }
    note(await documentNote(name, download));
  }
  if (parts.length === 0) return item.text;
  if (parts.every((p) => p.type === "text")) {
    return parts.map((p) => (p.type === "text" ? p.text : "")).join("\n\n");
  }
  return parts;
}

/**
 * Runs `run` unless `steps` already holds the step's result; records the result (and its notice)
 * once. Null when the signal aborted the step (nothing recorded).
 */
async function step<T>(
  ctx: MediaContext,
  item: InboxItem,
  steps: Record<string, unknown>,
  name: string,
  run: () => Promise<{ result: T; notice: string | undefined }>,
): Promise<T | null> {
  if (Object.hasOwn(steps, name)) return steps[name] as T;
  const outcome = await run().catch((err: unknown) => {
    if (err instanceof StepAborted) return null;
    throw err;
  });
  if (!outcome) return null;
  await ctx.store.recordMediaStep({
    inboxId: item.id,
    step: name,
    result: outcome.result,
    ...(outcome.notice !== undefined && { notice: outcome.notice }),
  });
  ctx.crashPoint("after_media_step");
  return outcome.result;
}

class StepAborted extends Error {}

async function downloadOne(
  ctx: MediaContext,
  item: InboxItem,
  index: number,
  attachment: InboundAttachment,
  signal: AbortSignal,
): Promise<Download> {
  const { media } = ctx;
  let bytes: Buffer;
  try {
    bytes = attachment.ref.startsWith("data:")
      ? decodeDataUrl(attachment.ref, media.maxFileBytes)
      : await media.fetchFile(item.platform, attachment, media.maxFileBytes, signal);
  } catch (err) {
    if (signal.aborted) throw new StepAborted();
    if (err instanceof FileTooLargeError) {
      const size = err.size ?? attachment.size;
      return {
        ok: false,
        reason: "too_large",
        detail: `it is larger than ${formatSize(media.maxFileBytes)}${size ? ` (${formatSize(size)})` : ""}`,
      };
    }
    ctx.logger.warn({ err, inboxId: item.id }, "file download failed");
    return { ok: false, reason: "failed", detail: `the download failed (${errorText(err)})` };
  }
  const folder = join(media.inboxRoot, item.sessionId);
  await mkdir(folder, { recursive: true });
  const prefix = `${item.id}-${index}-`;
  // The whole name, with the `.part` it is first written under, must fit the file system.
  const budget = MAX_NAME_BYTES - Buffer.byteLength(prefix) - PART_SUFFIX.length;
  const path = join(folder, `${prefix}${safeFileName(attachment.name ?? attachment.kind, budget)}`);
  // Written whole, then renamed: a crash never leaves a truncated file under the final name.
  await writeFile(`${path}${PART_SUFFIX}`, bytes);
  await rename(`${path}${PART_SUFFIX}`, path);
  const mime = attachment.mime ?? mimeOf(path);
  return { ok: true, path, size: bytes.length, mime };
}

async function transcribeOne(
  ctx: MediaContext,
  download: Extract<Download, { ok: true }>,
  name: string,
  signal: AbortSignal,
): Promise<Transcript> {
  const transcribe = ctx.media.transcribe;
  if (!transcribe) return { ok: false, detail: "no transcription model is configured" };
  try {
    const text = await transcribe(
      { bytes: await readFile(download.path), name, mime: download.mime },
      signal,
    );
    return text ? { ok: true, text } : { ok: false, detail: "the transcript was empty" };
  } catch (err) {
    if (signal.aborted) throw new StepAborted();
    return { ok: false, detail: errorText(err) };
  }
}

function downloadNotice(
  name: string,
  result: Extract<Download, { ok: false }>,
  media: MediaSettings,
): string {
  if (result.reason === "too_large") {
    return (
      `⚠️ ${name} is too large: I take files up to ${formatSize(media.maxFileBytes)}. ` +
      "Send a smaller file or a link; the rest of your message went through."
    );
  }
  return `⚠️ I could not download ${name}: ${result.detail}. The rest of your message went through.`;
}

function transcriptNotice(
  name: string,
  result: Transcript,
  path: string,
  media: MediaSettings,
): string | undefined {
  if (!result.ok) {
    return `⚠️ I could not transcribe ${name}: ${result.detail}. The audio is kept at ${path}.`;
  }
  if (!media.showTranscripts) return undefined;
  const chars = [...result.text];
  const shown =
    chars.length > ECHO_CHARS ? `${chars.slice(0, ECHO_CHARS - 1).join("")}…` : result.text;
  return `🎤 “${shown}”`;
}

async function documentNote(
  name: string,
  download: Extract<Download, { ok: true }>,
): Promise<string> {
  const head = `[The user sent a file: ${name} (${download.mime}, ${formatSize(download.size)}), saved at ${download.path}.]`;
  if (!isTextMime(download.mime) || download.size > INLINE_TEXT_BYTES) return head;
  const text = await readFile(download.path, "utf8").catch(() => null);
  return text === null ? head : `${head}\n<file name="${name}">\n${text}\n</file>`;
}

/** Tells the chat once per session that this model is set up without vision. */
async function tellNoVision(ctx: MediaContext, item: InboxItem): Promise<void> {
  await ctx.store.enqueueNoticeOnce({
    sessionKey: item.sessionKey,
    sessionId: item.sessionId,
    name: NO_VISION_NOTICE_NAME,
    address: item.address,
    text: NO_VISION_NOTICE,
  });
}

/** The name under which the no-vision notice is recorded per session. */
export const NO_VISION_NOTICE_NAME = "no_vision";

export const NO_VISION_NOTICE =
  "ℹ️ This model cannot see images: I saved yours in my workspace and can work with the file, but not look at it.";

/** The bytes of a base64 data URL (an image an API client sent inline). */
function decodeDataUrl(url: string, maxBytes: number): Buffer {
  const comma = url.indexOf(",");
  if (comma < 0 || !url.slice(0, comma).endsWith(";base64")) {
    throw new Error("not a base64 data URL");
  }
  const bytes = Buffer.from(url.slice(comma + 1), "base64");
  if (bytes.length > maxBytes) throw new FileTooLargeError(maxBytes, bytes.length);
  return bytes;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
