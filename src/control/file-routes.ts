/**
 * `GET /files/:id`: the files the agent sent (`send_file`), for the web chat and the API, which
 * show them as links. The access gate lets only authenticated requests this far (the control
 * token or the web session cookie); ids are random UUIDs, never paths.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { Hono } from "hono";
import type { TurnStore } from "../sessions/store.js";
import { httpError } from "./http-errors.js";
import type { AppEnv } from "./http-server.js";

const INLINE_TYPES = /^image\/(jpeg|png|gif|webp)$/;

export function createFileRoutes(store: TurnStore): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.get("/files/:id", async (c) => {
    const file = await store.getSentFile(c.req.param("id"));
    const info = file && (await stat(file.path).catch(() => null));
    if (!file || !info?.isFile()) throw httpError("NOT_FOUND", "No such file.");
    const inline = INLINE_TYPES.test(file.mime);
    const body = Readable.toWeb(createReadStream(file.path)) as ReadableStream<Uint8Array>;
    return new Response(body, {
      headers: {
        "content-type": inline ? file.mime : "application/octet-stream",
        "content-length": String(info.size),
        "content-disposition": `${inline ? "inline" : "attachment"}; filename*=UTF-8''${encodeURIComponent(file.name)}`,
        "x-content-type-options": "nosniff",
        // A file is never a page: nothing in it runs, whatever its content.
        "content-security-policy": "default-src 'none'; img-src 'self'; sandbox",
        "cache-control": "private, max-age=3600",
      },
    });
  });
  return app;
}
