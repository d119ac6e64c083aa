/**
 * Health, readiness and the authenticated control API (`/api/*`): status (also as a live SSE
 * stream), drain, restart, stop, and read access to sessions and transcripts.
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { z } from "zod";
import { GatewayError } from "../lib/errors.js";
import type { Store } from "../sessions/store.js";
import type { ControlSurface } from "./control-surface.js";
import { bearerToken, secretsEqual } from "./http-auth.js";
import type { AppEnv } from "./http-server.js";

const DrainBody = z.strictObject({ action: z.enum(["drain", "cancel"]) });

export function createControlRoutes(options: {
  surface: ControlSurface;
  store: Store;
  controlToken: string;
}): Hono<AppEnv> {
  const { surface, store, controlToken } = options;
  const app = new Hono<AppEnv>();

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", (c) => {
    const ready = surface.isReady();
    return c.json({ ready }, ready ? 200 : 503);
  });

  app.use("/api/*", async (c, next) => {
    const token = bearerToken(c.req.header("authorization"));
    if (!token || !secretsEqual(token, controlToken)) {
      throw new GatewayError(
        "UNAUTHORIZED",
        "Missing or wrong control token (Authorization: Bearer <token>).",
        401,
      );
    }
    await next();
  });

  app.get("/api/status", async (c) => c.json(await surface.status()));

  app.get("/api/status/stream", (c) =>
    streamSSE(c, async (stream) => {
      let wake: (() => void) | null = null;
      const unsubscribe = surface.onStatusChange(() => wake?.());
      stream.onAbort(() => wake?.());
      try {
        while (!stream.aborted && !stream.closed) {
          await stream.writeSSE({ data: JSON.stringify(await surface.status()) });
          // Refresh on every change, and at least every second for uptime and turn durations.
          await new Promise<void>((resolve) => {
            wake = resolve;
            setTimeout(resolve, 1000).unref();
          });
        }
      } finally {
        unsubscribe();
      }
    }),
  );

  app.post("/api/gateway/drain", async (c) => {
    const parsed = DrainBody.safeParse(await readJson(c.req.raw));
    if (!parsed.success) {
      throw new GatewayError(
        "BAD_REQUEST",
        'Body must be {"action":"drain"} or {"action":"cancel"}.',
        400,
      );
    }
    return c.json(await surface.drain(parsed.data.action));
  });
  app.post("/api/gateway/restart", async (c) => c.json(await surface.restart(), 202));
  app.post("/api/gateway/stop", async (c) => c.json(await surface.stop(), 202));

  app.get("/api/sessions", async (c) => {
    const limit = Number(c.req.query("limit") ?? 100);
    const sessions = await store.listSessions({
      limit: Number.isFinite(limit) ? Math.min(Math.max(limit, 1), 1000) : 100,
    });
    return c.json({
      sessions: sessions.map((s) => ({
        key: s.key,
        session_id: s.sessionId,
        platform: s.platform,
        message_count: s.messageCount,
        last_message: s.lastMessage,
        resume_pending: s.resumePending,
        suspended: s.suspended,
        updated_at: new Date(s.updatedAt).toISOString(),
      })),
    });
  });

  app.get("/api/sessions/:id", async (c) => {
    const id = c.req.param("id");
    const session = await store.getSessionById(id);
    if (!session) throw new GatewayError("NOT_FOUND", `No session with id ${id}.`, 404);
    const messages = await store.loadTranscript(id);
    return c.json({
      session: {
        key: session.key,
        session_id: id,
        resume_pending: session.resumePending,
        resume_reason: session.resumeReason,
        suspended: session.suspended,
        origin: session.origin,
        created_at: new Date(session.createdAt).toISOString(),
        updated_at: new Date(session.updatedAt).toISOString(),
      },
      messages: messages.map((m) => ({
        seq: m.seq,
        ...m.message,
        created_at: new Date(m.createdAt).toISOString(),
      })),
    });
  });

  return app;
}

/** Parses a JSON body; malformed JSON is a 400 with a clear message. */
export async function readJson(request: Request): Promise<unknown> {
  const text = await request.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new GatewayError("BAD_JSON", "Request body is not valid JSON.", 400);
  }
}
