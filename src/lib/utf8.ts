/** Text cut to a byte budget in UTF-8, as file systems count names (255 bytes on most). */
import { extname } from "node:path";

/** The longest file name most file systems take, in bytes. */
export const MAX_NAME_BYTES = 255;

/**
 * `text` cut to at most `maxBytes` bytes of UTF-8, at a character boundary (a code point is
 * never split, so the result is still valid UTF-8); `text` itself when it fits.
 */
export function cutUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end);
}

/**
 * A file name cut to `maxBytes` bytes of UTF-8 (default 255) with its extension kept (an
 * extension of up to 12 characters): `報告…報告.csv`, not `報告…報`. Unchanged when it fits.
 */
export function cutFileName(name: string, maxBytes = MAX_NAME_BYTES): string {
  if (Buffer.byteLength(name) <= maxBytes) return name;
  const found = extname(name);
  const ext = found.length <= 12 ? cutUtf8(found, Math.floor(maxBytes / 2)) : "";
  const stem = name.slice(0, name.length - (ext ? found.length : 0));
  return `${cutUtf8(stem, maxBytes - Buffer.byteLength(ext))}${ext}`;
}
