/** What Keel needs to know about a file's type: image or not, text or not, and a safe name. */
import { extname } from "node:path";
import { cutFileName, MAX_NAME_BYTES } from "../../lib/utf8.js";

const MIME_BY_EXT: Record<string, string> = {
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".png": "image/png",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".pdf": "application/pdf",
  ".txt": "text/plain",
  ".md": "text/markdown",
  ".csv": "text/csv",
  ".json": "application/json",
  ".html": "text/html",
  ".xml": "application/xml",
  ".yaml": "application/yaml",
  ".yml": "application/yaml",
  ".log": "text/plain",
  ".zip": "application/zip",
  ".ogg": "audio/ogg",
  ".oga": "audio/ogg",
  ".mp3": "audio/mpeg",
  ".m4a": "audio/mp4",
  ".wav": "audio/wav",
  ".mp4": "video/mp4",
};

/** The MIME type a file name suggests, or `application/octet-stream`. */
export function mimeOf(name: string): string {
  return MIME_BY_EXT[extname(name).toLowerCase()] ?? "application/octet-stream";
}

/** Images a model can take as an image part. */
export function isImageMime(mime: string): boolean {
  return /^image\/(jpeg|png|gif|webp)$/.test(mime);
}

/** Types whose bytes are text worth showing to the model inline. */
export function isTextMime(mime: string): boolean {
  return (
    mime.startsWith("text/") ||
    /^application\/(json|xml|yaml|x-yaml|javascript|x-sh|toml|csv)$/.test(mime)
  );
}

/**
 * A file name safe to create in a folder: no separators, no leading dots, at most 100 characters
 * and `maxBytes` bytes of UTF-8 (a name of 100 CJK characters is 300 bytes, more than a file
 * system takes), cut at a character boundary with its extension kept.
 */
export function safeFileName(name: string, maxBytes = MAX_NAME_BYTES): string {
  const cleaned = name
    .replace(/[/\\]/g, "_")
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
    .replace(/[\u0000-\u001f\u007f]/g, "")
    .replace(/^\.+/, "")
    .trim();
  const base = cleaned || "file";
  const ext = extname(base).slice(0, 12);
  const short = base.length <= 100 ? base : `${base.slice(0, 100 - ext.length)}${ext}`;
  return cutFileName(short, maxBytes) || "file";
}

/** A size for people: `812 KB`, `25.0 MB`. */
export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1_048_576) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}
