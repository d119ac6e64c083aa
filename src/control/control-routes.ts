/**
 * Health, readiness and the authenticated control API (`/api/*`): status (also as a live SSE
 * stream), drain, restart, stop, and read access to sessions and transcripts.
 */
import { Hono } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import { z } from "zod";
import { maskUrlCredentials } from "../lib/url-credentials.js";
import { isoTime } from "../lib/wire-time.js";
import type { ReportingStore, SessionStore, TurnStore } from "../sessions/store.js";
import type { ControlSurface, GatewayStatus } from "./control-surface.js";
import { httpError } from "./http-errors.js";
import type { AppEnv } from "./http-server.js";
import { readJson } from "./node-request.js";
import { listSessionsJson, type SessionListDeps } from "./session-list.js";
import { createStatusFeed, type StatusFeed } from "./status-feed.js";

const DrainBody = z.strictObject({ action: z.enum(["drain", "cancel"]) });

export function createControlRoutes(options: {
  surface: ControlSurface;
  store: SessionStore & TurnStore & ReportingStore;
  /** What `GET /api/sessions` adds to the store's list (states, cost). */
  sessionList: Omit<SessionListDeps, "store">;
  /** Where a failed status computation for the live stream is reported. */
  onError?: (err: unknown) => void;
}): Hono<AppEnv> {
  const { surface, store } = options;
  const app = new Hono<AppEnv>();
  const feed = createStatusFeed(surface, options.onError ?? (() => {}));

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/readyz", (c) => {
    const ready = surface.isReady();
    if (ready) return c.json({ ready }, 200);
    const reason = surface.notReadyReason?.() ?? null;
    return c.json({ ready, ...(reason && { reason }) }, 503);
  });

  // The access gate already refused anyone else; this keeps the rule next to the routes.
  app.use("/api/*", async (c, next) => {
    if (!c.get("access")?.operator) {
      throw httpError(
        "UNAUTHORIZED",
        "The control API needs the control token (Authorization: Bearer <token>).",
      );
    }
    await next();
  });

  // Platform errors are other systems' words: a URL with a password in them is masked.
  app.get("/api/status", async (c) => {
    try {
      return c.body(statusJson(await surface.status()), 200, {
        "content-type": "application/json",
      });
    } catch (err) {
      // The status reads the store: while it does not answer, say so rather than a bare 500.
      if (surface.storeDown?.()) throw httpError("STORE_UNAVAILABLE");
      throw err;
    }
  });

  app.get("/api/status/stream", (c) => streamSSE(c, (stream) => streamStatus(stream, feed)));

  app.post("/api/gateway/drain", async (c) => {
    const parsed = DrainBody.safeParse(await readJson(c));
    if (!parsed.success) {
      throw httpError("BAD_REQUEST", 'Body must be {"action":"drain"} or {"action":"cancel"}.');
    }
    return c.json(await surface.drain(parsed.data.action));
  });
  app.post("/api/gateway/restart", async (c) => c.json(await surface.restart(), 202));
  app.post("/api/gateway/stop", async (c) => c.json(await surface.stop(), 202));

  app.get("/api/sessions", async (c) => {
    const limit = Number(c.req.query("limit") ?? 100);
    // Keel's own lanes (`system:notices:…`) only with `?internal=1`.
    const internal = ["1", "true"].includes(c.req.query("internal") ?? "");
    return c.json(
      await listSessionsJson(
        { ...options.sessionList, store },
        { limit: Number.isFinite(limit) ? Math.min(Math.max(limit, 1), 1000) : 100, internal },
      ),
    );
  });

  app.get("/api/sessions/:id", async (c) => c.json(await sessionJson(store, c.req.param("id"))));

  return app;
}

/** The status as JSON, with credentials inside URLs masked. */
function statusJson(status: GatewayStatus): string {
  return maskUrlCredentials(JSON.stringify(status));
}

/** The live status as server-sent events, until the client goes. */
async function streamStatus(stream: SSEStreamingApi, feed: StatusFeed): Promise<void> {
  // Only the latest status matters: a slow client skips the ones it had no time for.
  let latest: GatewayStatus | null = null;
  let wake: (() => void) | null = null;
  const unsubscribe = feed.subscribe((status) => {
    latest = status;
    wake?.();
  });
  stream.onAbort(() => wake?.());
  try {
    while (!stream.aborted && !stream.closed) {
      if (latest) {
        const status: GatewayStatus = latest;
        latest = null;
        await stream.writeSSE({ data: statusJson(status) });
        continue;
      }
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = null;
    }
  } finally {
    unsubscribe();
  }
}

/** `GET /api/sessions/:id`: a session, its usage, its compaction and its whole transcript. */
async function sessionJson(store: SessionStore & TurnStore & ReportingStore, id: string) {
  const session = await store.getSessionById(id);
  if (!session) throw httpError("NOT_FOUND", `No session with id ${id}.`);
  const messages = await store.loadTranscript(id);
  const usage = await store.sessionUsage(id);
  const compaction = await store.latestCompaction(id);
  return {
    usage: {
      calls: usage.calls,
      prompt_tokens: usage.promptTokens,
      completion_tokens: usage.completionTokens,
      estimated_calls: usage.estimatedCalls,
      last_prompt_tokens: usage.lastPromptTokens,
    },
    // What the model sees instead of the messages up to `through_seq` (they all stay below).
    compaction: compaction && {
      through_seq: compaction.throughSeq,
      summary: compaction.summary,
      created_at: isoTime(compaction.createdAt),
    },
    session: {
      key: session.key,
      session_id: id,
      resume_pending: session.resumePending,
      resume_reason: session.resumeReason,
      suspended: session.suspended,
      origin: session.origin,
      created_at: isoTime(session.createdAt),
      updated_at: isoTime(session.updatedAt),
    },
    messages: messages.map((m) => ({
      seq: m.seq,
      ...m.message,
      created_at: isoTime(m.createdAt),
    })),
  };
}
