/**
 * The OpenAI-compatible API as a platform: `POST /v1/chat/completions` (stream or not) and
 * `GET /v1/models`. The conversation is kept server-side; `X-Session-Id` continues a session.
 * Replies of turns nobody waits for (a resume after a restart) stay in the transcript.
 */
import { randomUUID } from "node:crypto";
import { type Context, Hono } from "hono";
import { streamSSE } from "hono/streaming";
import type { Logger } from "pino";
import { readJson } from "../../control/control-routes.js";
import { bearerToken, isLoopbackAddress, secretsEqual } from "../../control/http-auth.js";
import type { AppEnv } from "../../control/http-server.js";
import type { RunnerEvent, RunnerEventListener } from "../../runner/events.js";
import type { Store } from "../../sessions/store.js";
import type { InboundSink, OutboundReply, PlatformAdapter, PlatformStatus } from "../platform.js";
import { type Completion, TurnWaiters } from "./turn-waiters.js";
import {
  ChatCompletionRequest,
  chunkBody,
  completionBody,
  errorBody,
  historyOf,
  messageText,
} from "./wire.js";

export interface OpenAiApiAdapterOptions {
  /** Bearer key clients must send; when unset only loopback clients are served. */
  apiKey: string | undefined;
  modelName: string | undefined;
  store: Pick<Store, "getSessionById" | "listOpenInbox">;
  subscribe(listener: RunnerEventListener): () => void;
  logger: Logger;
}

export class OpenAiApiAdapter implements PlatformAdapter {
  readonly name = "api";
  private sink: InboundSink | null = null;
  private unsubscribe: (() => void) | null = null;
  private readonly waiters = new TurnWaiters(async (inboxId) =>
    (await this.options.store.listOpenInbox()).some((item) => item.id === inboxId),
  );

  constructor(private readonly options: OpenAiApiAdapterOptions) {}

  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    this.unsubscribe = this.options.subscribe((event: RunnerEvent) => this.waiters.onEvent(event));
  }

  async stop(): Promise<void> {
    this.sink = null;
    this.unsubscribe?.();
    this.waiters.failAll(
      "The gateway is stopping; the reply will be kept in the session's transcript.",
    );
  }

  /** Notices answer a waiting request; turn replies were already streamed and stay in the transcript. */
  async deliver(reply: OutboundReply): Promise<void> {
    if (reply.kind === "notice") this.waiters.onNotice(reply.sessionKey, reply.text);
  }

  status(): PlatformStatus {
    return { state: this.sink ? "connected" : "stopped", error: null };
  }

  routes(): Hono<AppEnv> {
    const app = new Hono<AppEnv>();
    app.use("/v1/*", async (c, next) => {
      const denied = this.authorize(c);
      if (denied) return denied;
      return next();
    });
    app.get("/v1/models", (c) =>
      c.json({
        object: "list",
        data: [{ id: this.modelName(), object: "model", created: 0, owned_by: "keel" }],
      }),
    );
    app.post("/v1/chat/completions", (c) => this.complete(c));
    return app;
  }

  private authorize(c: Context<AppEnv>): Response | null {
    const { apiKey } = this.options;
    if (apiKey) {
      const token = bearerToken(c.req.header("authorization"));
      if (token && secretsEqual(token, apiKey)) return null;
      return c.json(
        errorBody(
          "Invalid or missing API key (Authorization: Bearer <platforms.api.key>).",
          "invalid_request_error",
          "invalid_api_key",
        ),
        401,
      );
    }
    if (isLoopbackAddress(c.env.incoming.socket.remoteAddress)) return null;
    return c.json(
      errorBody(
        "This gateway serves the API to loopback clients only; set platforms.api.key.",
        "invalid_request_error",
      ),
      403,
    );
  }

  private modelName(): string {
    return this.options.modelName ?? "keel";
  }

  private async complete(c: Context<AppEnv>): Promise<Response> {
    // JSON only: a form or text/plain body is what a cross-site page could send without a preflight.
    if (!/^application\/json\b/i.test(c.req.header("content-type") ?? "")) {
      return c.json(
        errorBody("Content-Type must be application/json.", "invalid_request_error"),
        415,
      );
    }
    let body: unknown;
    try {
      body = await readJson(c.req.raw);
    } catch {
      return c.json(errorBody("Request body is not valid JSON.", "invalid_request_error"), 400);
    }
    const parsed = ChatCompletionRequest.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return c.json(
        errorBody(
          `Invalid request: ${issue.path.join(".") || "body"}: ${issue.message}`,
          "invalid_request_error",
        ),
        400,
      );
    }
    const request = parsed.data;
    const last = request.messages[request.messages.length - 1]!;
    if (last.role !== "user" || messageText(last).trim() === "") {
      return c.json(
        errorBody("The last message must be a non-empty user message.", "invalid_request_error"),
        400,
      );
    }
    const target = await this.resolveSession(c.req.header("x-session-id"));
    if (!target) {
      return c.json(
        errorBody(
          `Unknown session id ${c.req.header("x-session-id")}.`,
          "invalid_request_error",
          "session_not_found",
        ),
        404,
      );
    }
    const sink = this.sink;
    if (!sink)
      return c.json(
        errorBody("The gateway is not accepting requests right now.", "server_error"),
        503,
      );

    const waiter = this.waiters.add(target.key);
    try {
      const accepted = await sink.receive({
        platform: "api",
        chatId: target.key,
        platformMessageId: c.req.header("idempotency-key") ?? randomUUID(),
        sessionKey: target.key,
        text: messageText(last),
        address: { platform: "api", chatId: target.key },
        ...(target.fresh && { history: historyOf(request.messages.slice(0, -1)) }),
      });
      if (!accepted.accepted) {
        this.waiters.remove(waiter);
        return c.json(
          errorBody(
            "This request (Idempotency-Key) was already received.",
            "invalid_request_error",
            "duplicate_request",
          ),
          409,
        );
      }
      this.waiters.bind(waiter, accepted.inboxId);
      c.header("X-Session-Id", accepted.sessionId);
    } catch (err) {
      this.waiters.remove(waiter);
      this.options.logger.error({ err }, "api request could not be stored");
      return c.json(
        errorBody(
          "The message could not be stored; nothing was accepted. Try again.",
          "server_error",
        ),
        503,
      );
    }
    const id = `chatcmpl-${randomUUID().replaceAll("-", "")}`;
    const created = Math.floor(Date.now() / 1000);
    const model = this.modelName();
    if (request.stream) return this.streamReply(c, waiter, id, model, created);
    // A client that hangs up stops waiting; its turn goes on and its reply stays in the transcript.
    c.req.raw.signal.addEventListener("abort", () => this.waiters.remove(waiter), { once: true });
    const done = await waiter.completion;
    this.waiters.remove(waiter);
    return this.finalResponse(c, done, id, model, created);
  }

  private finalResponse(
    c: Context<AppEnv>,
    done: Completion,
    id: string,
    model: string,
    created: number,
  ): Response {
    if (done.kind === "error")
      return c.json(errorBody(done.text, "upstream_error", "model_error"), 502);
    if (done.kind === "interrupted")
      return c.json(
        errorBody(done.text || "The turn was interrupted.", "server_error", "interrupted"),
        409,
      );
    return c.json(completionBody(id, model, created, done.text));
  }

  private streamReply(
    c: Context<AppEnv>,
    waiter: ReturnType<TurnWaiters["add"]>,
    id: string,
    model: string,
    created: number,
  ) {
    return streamSSE(c, async (stream) => {
      stream.onAbort(() => this.waiters.remove(waiter));
      await stream.writeSSE({
        data: JSON.stringify(
          chunkBody(id, model, created, { role: "assistant", content: "" }, null),
        ),
      });
      let streamed = "";
      this.waiters.attach(waiter, (text) => {
        streamed += text;
        void stream.writeSSE({
          data: JSON.stringify(chunkBody(id, model, created, { content: text }, null)),
        });
      });
      const done = await waiter.completion;
      this.waiters.remove(waiter);
      if (done.kind === "error") {
        await stream.writeSSE({
          data: JSON.stringify(errorBody(done.text, "upstream_error", "model_error")),
        });
      } else if (streamed.length === 0) {
        // Text that came without deltas: a notice, or a reply the model sent in one piece.
        await stream.writeSSE({
          data: JSON.stringify(chunkBody(id, model, created, { content: done.text }, null)),
        });
      }
      await stream.writeSSE({ data: JSON.stringify(chunkBody(id, model, created, {}, "stop")) });
      await stream.writeSSE({ data: "[DONE]" });
    });
  }

  private async resolveSession(
    sessionId: string | undefined,
  ): Promise<{ key: string; fresh: boolean } | null> {
    if (sessionId === undefined) return { key: `agent:main:api:${randomUUID()}`, fresh: true };
    const session = await this.options.store.getSessionById(sessionId);
    if (!session?.key.startsWith("agent:main:api:")) return null;
    return { key: session.key, fresh: false };
  }
}
