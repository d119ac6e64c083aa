/**
 * A downloaded file read at most to a size: a user's file on a platform's media server can be
 * anything, and the gateway holds what it reads in memory.
 */

/**
 * Reads `body` until `maxBytes`. With more, it stops there, cancels the rest and answers
 * `tooLarge` (no bytes).
 */
export async function readAtMost(
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
): Promise<{ bytes: Buffer; tooLarge: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      await body.cancel().catch(() => {});
      return { bytes: Buffer.alloc(0), tooLarge: true };
    }
    chunks.push(Buffer.from(chunk));
  }
  return { bytes: Buffer.concat(chunks), tooLarge: false };
}
