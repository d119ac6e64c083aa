/**
 * Files a web chat page attaches: `POST /uploads` stores the body under a random id in
 * `$KEEL_HOME/uploads/`, and the page then sends a message naming the id. The message's inbox row
 * holds only that reference; the turn reads the file from here (fetchFile) into the workspace,
 * like any platform's file. The route sits behind the access gate (control token or the session
 * cookie, same origin), and bodies are capped at `maxBytes`.
 */
import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Hono } from "hono";
import { FileTooLargeError } from "../../contract/platform.js";
import { httpError } from "../../control/http-errors.js";
import type { AppEnv } from "../../control/http-server.js";

/** The form of an upload id (a UUID): the only names ever read from the folder. */
export const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** The path of the upload route; the HTTP server's general body limit does not apply to it. */
export const UPLOADS_PATH = "/uploads";

export class WebchatUploads {
  constructor(
    private readonly dir: string,
    private readonly maxBytes: number,
  ) {}

  routes(): Hono<AppEnv> {
    const app = new Hono<AppEnv>();
    app.post(UPLOADS_PATH, async (c) => {
      const declared = Number(c.req.header("content-length") ?? Number.NaN);
      if (declared > this.maxBytes) throw tooLarge(this.maxBytes);
      const body = c.req.raw.body;
      if (!body) throw httpError("BAD_REQUEST", "The upload is empty.");
      const id = randomUUID();
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      const path = join(this.dir, id);
      let size = 0;
      const cap = this.maxBytes;
      try {
        await pipeline(
          Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>),
          async function* (source: AsyncIterable<Buffer>) {
            for await (const chunk of source) {
              size += chunk.length;
              if (size > cap) throw new FileTooLargeError(cap);
              yield chunk;
            }
          },
          createWriteStream(`${path}.part`, { mode: 0o600 }),
        );
      } catch (err) {
        await rm(`${path}.part`, { force: true });
        throw err instanceof FileTooLargeError ? tooLarge(cap) : err;
      }
      if (size === 0) {
        await rm(`${path}.part`, { force: true });
        throw httpError("BAD_REQUEST", "The upload is empty.");
      }
      await rename(`${path}.part`, path);
      return c.json({ id, size }, 201);
    });
    return app;
  }

  /** The bytes of an upload; throws when there is none (or it is over `maxBytes`). */
  async read(id: string, maxBytes: number): Promise<Buffer> {
    if (!UPLOAD_ID.test(id)) throw new Error("not an upload id");
    const bytes = await readFile(join(this.dir, id));
    if (bytes.length > maxBytes) throw new FileTooLargeError(maxBytes, bytes.length);
    return bytes;
  }
}

function tooLarge(maxBytes: number) {
  return httpError(
    "BODY_TOO_LARGE",
    `Files up to ${Math.round(maxBytes / 1_048_576)} MB can be attached; raise platforms.telegram.max_file_mb in config.yaml to accept larger ones.`,
  );
}
