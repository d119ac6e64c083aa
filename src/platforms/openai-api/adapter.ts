/**
 * The OpenAI-compatible API as a platform: `POST /v1/chat/completions` (stream or not) and
 * `GET /v1/models`. The conversation is kept server-side; `X-Session-Id` continues a session.
 * Replies of turns nobody waits for (a resume after a restart) stay in the transcript, where a
 * retry with the same `Idempotency-Key` finds them. Work the runner refuses (no model, draining,
 * stopping) and turns a stop cuts off are answered with OpenAI-shaped 503s.
 */
import { randomUUID } from "node:crypto";
import { type Context, Hono } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import type { Logger } from "pino";
import type {
  ClientToolResult,
  IdempotencyClaim,
  InboundMessage,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  RunnerEvent,
} from "../../contract/platform.js";
import type { Granted } from "../../control/access.js";
import type { AppEnv } from "../../control/http-server.js";
import { clientGoneSignal, onClientGone } from "../../control/node-request.js";
import type { InboxStore, SessionStore, TurnStore } from "../../sessions/store.js";
import { servedStatus } from "../kit/connection-state.js";
import { BoundedSse } from "./bounded-stream.js";
import {
  approvalChunk,
  endChatStream,
  type ResponseMeta,
  roleChunk,
  TOOL_EVENTS_HEADER,
  toolChunk,
} from "./chat-stream.js";
import { apiError, failureError, renderApiError } from "./errors.js";
import {
  completionIdFor,
  credentialScope,
  IDEMPOTENCY_TTL_MS,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  requestHash,
} from "./idempotency.js";
import { type Completion, failureOf, keyReusedFailure, refusedFailure } from "./outcomes.js";
import { Repeats } from "./repeats.js";
import { readChatRequest, readResponsesRequest } from "./requests.js";
import {
  messageItemId,
  ResponseEvents,
  type ResponseMeta as ResponsesMeta,
  responseBody,
  responseIdFor,
  sessionOfResponseId,
} from "./responses-wire.js";
import { maySeeSession, sessionCredential } from "./session-credential.js";
import { type StatelessTarget, Threads } from "./threads.js";
import { TurnWaiters, type Waiter } from "./turn-waiters.js";
import { chunkBody, clientToolsOf, completionBody, historyOf } from "./wire.js";

export interface OpenAiApiAdapterOptions {
  modelName: string | undefined;
  store: SessionStore & InboxStore & Pick<TurnStore, "loadTranscript">;
  logger: Logger;
  /** `http.max_buffered_bytes`: what may wait for a stream client before it is cut off. */
  maxBufferedBytes: number;
  /**
   * With several gateways on one store: how often a waiting request reads its message's answer
   * from the record, since another gateway may have run its turn (0 or absent: never; one
   * gateway hears of every turn it runs).
   */
  recordPollMs?: number;
}

export class OpenAiApiAdapter implements PlatformAdapter {
  readonly name = "api";
  readonly repliesInBand = true;
  private sink: InboundSink | null = null;
  private stopped = false;
  private readonly waiters = new TurnWaiters((inboxId) =>
    this.options.store.findInboxAnswer(inboxId),
  );
  private readonly repeats: Repeats;
  private recordPoll: NodeJS.Timeout | null = null;
  private readonly threads: Threads;

  constructor(private readonly options: OpenAiApiAdapterOptions) {
    this.repeats = new Repeats(options.store);
    this.threads = new Threads(options.store);
  }

  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
    this.stopped = false;
    this.repeats.start();
    const every = this.options.recordPollMs ?? 0;
    if (every > 0 && !this.recordPoll) {
      let polling = false;
      this.recordPoll = setInterval(() => {
        if (polling) return;
        polling = true;
        this.repeats.rereadAll();
        void this.waiters.settleFromRecord().finally(() => {
          polling = false;
        });
      }, every);
      this.recordPoll.unref();
    }
  }

  /** Follows turns while started: a waiting request is answered from its turn's events. */
  onRunnerEvent(event: RunnerEvent): void {
    if (!this.sink) return;
    this.waiters.onEvent(event);
    this.repeats.onEvent(event);
  }

  async stop(): Promise<void> {
    this.sink = null;
    this.stopped = true;
    if (this.recordPoll) clearInterval(this.recordPoll);
    this.recordPoll = null;
    this.waiters.cutOffAll();
    this.repeats.stop();
  }

  /** Notices answer a waiting request; turn replies were already streamed and stay in the transcript. */
  async deliver(reply: OutboundReply): Promise<void> {
    if (reply.kind !== "notice") return;
    this.waiters.onNotice(reply.sessionKey, reply.text);
    this.repeats.onNotice(reply.sessionKey);
  }

  readonly status = () => servedStatus(this.sink !== null);

  routes(): Hono<AppEnv> {
    const app = new Hono<AppEnv>();
    app.onError((err, c) => renderApiError(c, err, this.options.logger));
    // The HTTP server's access gate checked the credential (control token or platforms.api.key,
    // docs/security.md) before any /v1 route runs; this refuses a request it did not let in.
    app.use("/v1/*", async (c, next) => {
      if (!c.get("access")) throw apiError("missing_api_key");
      return next();
    });
    app.get("/v1/models", (c) => c.json({ object: "list", data: [this.modelEntry()] }));
    // The official clients' `models.retrieve()`: the one model there is, by its name.
    app.get("/v1/models/:id{.+}", (c) => {
      const id = c.req.param("id");
      if (id !== this.modelName()) {
        throw apiError(
          "model_not_found",
          `The model ${id} does not exist; GET /v1/models lists the one there is.`,
        );
      }
      return c.json(this.modelEntry());
    });
    app.post("/v1/chat/completions", (c) => this.complete(c));
    app.post("/v1/responses", (c) => this.respond(c));
    for (const [path, allowed] of Object.entries(API_ROUTES)) {
      app.all(path, (c) => {
        c.header("Allow", allowed);
        throw apiError(
          "method_not_allowed",
          `${c.req.method} is not allowed on ${path}; use ${allowed}.`,
        );
      });
    }
    app.all("/v1/*", (c) => {
      throw apiError("unknown_route", `No route for ${c.req.method} ${c.req.path}.`);
    });
    return app;
  }

  private modelEntry() {
    return { id: this.modelName(), object: "model", created: 0, owned_by: "keel" };
  }

  private modelName(): string {
    return this.options.modelName ?? "keel";
  }

  private async complete(c: Context<AppEnv>): Promise<Response> {
    const { body, request, text, images, results } = await readChatRequest(c);
    const sessionHeader = c.req.header("x-session-id");
    const claim = this.claimOf(c, body, sessionHeader);
    const meta: ResponseMeta = {
      id: claim ? completionIdFor(claim) : `chatcmpl-${randomUUID().replaceAll("-", "")}`,
      model: this.modelName(),
      created: Math.floor(Date.now() / 1000),
      includeUsage:
        (request.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true,
    };
    const stream = request.stream === true;
    // A key seen before answers from the record, whatever the gateway is doing now.
    if (claim) {
      const seen = await this.beforeStoring(() =>
        this.options.store.findIdempotencyKey(claim.scope, claim.key),
      );
      if (seen && seen.requestHash !== claim.requestHash) throw failureError(keyReusedFailure());
      if (seen) return this.repeat(c, seen.item.id, seen.item.sessionId, meta, stream);
    }
    const granted = c.get("access")!;
    const credential = sessionCredential(granted, c.req.header("authorization"));
    // Another credential's session is answered exactly like an unknown one (404).
    const target = await this.beforeStoring(() =>
      sessionHeader === undefined
        ? this.threads.resolve(request.messages, results, granted, credential)
        : this.resolveSession(sessionHeader, granted, credential),
    );
    if (!target) throw apiError("session_not_found", `Unknown session id ${sessionHeader}.`);
    if (results.length > 0) await this.checkResults(target, results);
    // `keel chat` asks to see the agent's tool calls; other clients get plain OpenAI chunks.
    const wantsTools = stream && c.req.header(TOOL_EVENTS_HEADER) !== undefined;
    const submitted = await this.submit(c, target, wantsTools, {
      text,
      images,
      ...(target.fresh && { history: historyOf(request.messages.slice(0, -1)) }),
      ...((request.tools !== undefined || results.length > 0) && {
        clientTools: {
          tools: clientToolsOf(request),
          ...(results.length > 0 && { results }),
        },
      }),
      ...(claim && { idempotency: claim }),
    });
    if (submitted.kind === "repeat") {
      // The same key arrived concurrently and was stored first: this is a repeat of it.
      if (submitted.conflict) throw failureError(keyReusedFailure());
      return this.repeat(c, submitted.inboxId, submitted.sessionId, meta, stream);
    }
    const { waiter } = submitted;
    if (stream) return this.streamReply(c, waiter, meta);
    // A client that hangs up stops waiting; its turn goes on and its reply stays in the transcript.
    const stopListening = onClientGone(c, () => this.waiters.remove(waiter));
    const done = await waiter.completion;
    stopListening();
    this.waiters.remove(waiter);
    return this.finalResponse(c, done, meta);
  }

  /** `POST /v1/responses`: the Responses API's minimal part (responses-wire.ts). */
  private async respond(c: Context<AppEnv>): Promise<Response> {
    const { request, messages, text, images } = await readResponsesRequest(c);
    const granted = c.get("access")!;
    const credential = sessionCredential(granted, c.req.header("authorization"));
    const previous = request.previous_response_id ?? null;
    let target: StatelessTarget | null = { key: `agent:main:api:${randomUUID()}`, fresh: true };
    if (previous !== null) {
      const sessionId = sessionOfResponseId(previous);
      target = sessionId
        ? await this.beforeStoring(() => this.resolveSession(sessionId, granted, credential))
        : null;
      // Another credential's response is answered exactly like an unknown one.
      if (!target) {
        throw apiError(
          "previous_response_not_found",
          `Previous response with id '${previous}' not found.`,
          "previous_response_id",
        );
      }
    }
    const submitted = await this.submit(c, target, false, {
      text,
      images,
      ...(target.fresh && { history: historyOf(messages.slice(0, -1)) }),
    });
    if (submitted.kind === "repeat") throw apiError("not_stored");
    const { waiter } = submitted;
    const meta: ResponsesMeta = {
      id: responseIdFor(submitted.sessionId),
      messageId: messageItemId(),
      model: this.modelName(),
      createdAt: Math.floor(Date.now() / 1000),
      previousResponseId: previous,
    };
    if (request.stream === true) return this.streamResponse(c, waiter, meta);
    const stopListening = onClientGone(c, () => this.waiters.remove(waiter));
    const done = await waiter.completion;
    stopListening();
    this.waiters.remove(waiter);
    const failure = failureOf(done);
    if (failure) throw failureError(failure);
    const reply = done.kind === "reply" ? done : { text: "", usage: undefined };
    return c.json(
      responseBody(meta, { status: "completed", text: reply.text, usage: reply.usage }),
    );
  }

  /** A response streamed as the Responses API's events; a failure is `response.failed`. */
  private streamResponse(c: Context<AppEnv>, waiter: Waiter, meta: ResponsesMeta) {
    return streamSSE(c, async (raw) => {
      raw.onAbort(() => this.waiters.remove(waiter));
      const out = this.bounded(c, raw, () => this.waiters.remove(waiter));
      const events = new ResponseEvents(meta);
      const send = (event: { type: string }) => out.send(JSON.stringify(event), event.type);
      await send(events.created());
      await send(events.itemAdded());
      await send(events.partAdded());
      let text = "";
      // Deltas a lagging client has not taken yet are merged into one (bounded-stream.ts).
      const delta = (piece: string) => {
        const event = events.delta(piece);
        return { data: JSON.stringify(event), event: event.type };
      };
      const write = (piece: string) => {
        text += piece;
        void out.sendText(piece, delta);
      };
      let streamed = false;
      this.waiters.attach(waiter, (piece) => {
        streamed ||= piece.length > 0;
        write(piece);
      });
      this.waiters.attachQuestions(waiter, (question) => write(`${question.text}\n\n`));
      const done = await waiter.completion;
      this.waiters.remove(waiter);
      // Text still merging goes out first, so its delta is numbered before the events that follow.
      out.flushText();
      const failure = failureOf(done);
      if (failure) {
        const { code, message } = failure.body.error;
        await send(events.failed(code, message));
        return;
      }
      // Text that came without deltas (a notice, a reply in one piece) goes as one delta.
      if (done.kind === "reply" && done.text && !streamed) write(done.text);
      out.flushText();
      const usage = done.kind === "reply" ? done.usage : undefined;
      for (const event of events.completed(text, usage)) await send(event);
    });
  }

  /**
   * Hands a request's message to the runner, with a waiter for its turn registered first so
   * that no event is missed; `repeat` when its Idempotency-Key was stored first by another.
   */
  private async submit(
    c: Context<AppEnv>,
    target: StatelessTarget,
    wantsTools: boolean,
    input: Pick<InboundMessage, "history" | "clientTools" | "idempotency"> & {
      text: string;
      images: { url: string; mime?: string }[];
    },
  ): Promise<
    | { kind: "waiting"; waiter: Waiter; sessionId: string }
    | { kind: "repeat"; inboxId: number; sessionId: string; conflict: boolean }
  > {
    const granted = c.get("access")!;
    const sink = this.sink;
    if (!sink) {
      throw this.stopped ? failureError(refusedFailure("stopping")) : apiError("not_accepting");
    }
    // Refused up front, nothing is stored: the client is told why and may retry.
    const refusal = sink.refusalFor?.(input.text) ?? null;
    if (refusal) throw failureError(refusedFailure(refusal));
    const { images, ...rest } = input;
    const waiter = this.waiters.add(target.key, { wantsTools });
    let accepted: Awaited<ReturnType<InboundSink["receive"]>>;
    try {
      accepted = await sink.receive({
        ...rest,
        platform: "api",
        chatId: target.key,
        platformMessageId: randomUUID(),
        sessionKey: target.key,
        address: { platform: "api", chatId: target.key },
        ...(granted.operator && { operator: true }),
        credential: sessionCredential(granted, c.req.header("authorization")),
        ...(target.thread && { thread: target.thread }),
        ...(images.length > 0 && {
          attachments: images.map((image, i) => ({
            kind: "photo" as const,
            ref: image.url,
            name: `image-${i + 1}.${image.mime?.split("/")[1] ?? "img"}`,
            ...(image.mime && { mime: image.mime }),
          })),
        }),
      });
    } catch (err) {
      this.waiters.remove(waiter);
      this.options.logger.error({ err }, "api request could not be stored");
      throw apiError("not_stored");
    }
    if (!accepted.accepted) {
      this.waiters.remove(waiter);
      return {
        kind: "repeat",
        inboxId: accepted.inboxId,
        sessionId: accepted.sessionId,
        conflict: accepted.idempotencyConflict === true,
      };
    }
    this.waiters.bind(waiter, accepted.inboxId);
    c.header("X-Session-Id", accepted.sessionId);
    return { kind: "waiting", waiter, sessionId: accepted.sessionId };
  }

  /**
   * A read before the message is stored: when the store fails (a database that does not answer),
   * nothing was accepted, and the client hears so with the retryable 503, not a 500.
   */
  private async beforeStoring<T>(read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      this.options.logger.error({ err }, "api request could not be looked up in the store");
      throw apiError("not_stored");
    }
  }

  /** The request's Idempotency-Key, scoped to its credential; undefined without one. */
  private claimOf(
    c: Context<AppEnv>,
    body: unknown,
    sessionHeader: string | undefined,
  ): IdempotencyClaim | undefined {
    const key = c.req.header("idempotency-key");
    if (key === undefined) return undefined;
    if (key.length === 0 || key.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
      throw apiError(
        "invalid_request",
        `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters.`,
      );
    }
    return {
      scope: credentialScope(c.req.header("authorization")),
      key,
      requestHash: requestHash(body, sessionHeader),
      ttlMs: IDEMPOTENCY_TTL_MS,
    };
  }

  /** Answers a repeated request with the first one's outcome, waiting for it if need be. */
  private repeat(
    c: Context<AppEnv>,
    inboxId: number,
    sessionId: string,
    meta: ResponseMeta,
    stream: boolean,
  ): Response | Promise<Response> {
    c.header("X-Session-Id", sessionId);
    if (!stream) {
      return this.repeats.answerOf(inboxId, clientGoneSignal(c)).then((done) =>
        // null: the client hung up; nobody reads this.
        done ? this.finalResponse(c, done, meta) : new Response(null, { status: 204 }),
      );
    }
    return streamSSE(c, async (raw) => {
      const gone = new AbortController();
      raw.onAbort(() => gone.abort());
      const out = this.bounded(c, raw, () => gone.abort());
      await out.send(JSON.stringify(roleChunk(meta)));
      const done = await this.repeats.answerOf(inboxId, gone.signal);
      if (done) await endChatStream(out, meta, done, false);
    });
  }

  private finalResponse(c: Context<AppEnv>, done: Completion, meta: ResponseMeta): Response {
    const failure = failureOf(done);
    if (failure) throw failureError(failure);
    const text = done.kind === "reply" ? done.text : "";
    const usage = done.kind === "reply" ? done.usage : undefined;
    const calls = done.kind === "reply" ? done.toolCalls : undefined;
    return c.json(completionBody(meta.id, meta.model, meta.created, text, usage, calls));
  }

  private streamReply(
    c: Context<AppEnv>,
    waiter: ReturnType<TurnWaiters["add"]>,
    meta: ResponseMeta,
  ) {
    return streamSSE(c, async (raw) => {
      raw.onAbort(() => this.waiters.remove(waiter));
      // Cut off: the request stops waiting; its turn goes on and its reply stays in the session.
      const out = this.bounded(c, raw, () => this.waiters.remove(waiter));
      await out.send(JSON.stringify(roleChunk(meta)));
      // Text a lagging client has not taken yet is merged into one chunk (bounded-stream.ts).
      const content = (text: string) => ({
        data: JSON.stringify(chunkBody(meta.id, meta.model, meta.created, { content: text }, null)),
      });
      let streamed = false;
      this.waiters.attach(waiter, (text) => {
        streamed ||= text.length > 0;
        void out.sendText(text, content);
      });
      if (waiter.wantsTools) {
        this.waiters.attachTools(waiter, (tool) => {
          void out.send(JSON.stringify(toolChunk(meta, tool)));
        });
      }
      // A call waits for approval: the question is a piece of the answer, and the stream stays
      // open for the turn that continues once it is answered (or timed out).
      this.waiters.attachQuestions(waiter, (question) => {
        void out.sendText(`${question.text}\n\n`, content);
        if (waiter.wantsTools) {
          void out.send(JSON.stringify(approvalChunk(meta, question.approvalId)));
        }
      });
      const done = await waiter.completion;
      this.waiters.remove(waiter);
      await endChatStream(out, meta, done, streamed);
    });
  }

  /** The stream to one client, cut off once more than `maxBufferedBytes` wait for it. */
  private bounded(c: Context<AppEnv>, raw: SSEStreamingApi, onCutOff: () => void): BoundedSse {
    const { maxBufferedBytes, logger } = this.options;
    return new BoundedSse(raw, c.env?.outgoing, maxBufferedBytes, (bufferedBytes) => {
      // It stopped reading; its turn goes on and the reply stays in the session.
      logger.warn({ bufferedBytes, maxBufferedBytes }, "api stream client cut off");
      onCutOff();
    });
  }

  /** The session `X-Session-Id` names (null: unknown, or not this credential's). */
  private async resolveSession(
    sessionId: string,
    granted: Granted,
    credential: string,
  ): Promise<StatelessTarget | null> {
    const session = await this.options.store.getSessionById(sessionId);
    if (!session?.key.startsWith("agent:main:api:")) return null;
    if (!maySeeSession(granted, credential, session.credential)) return null;
    return { key: session.key, sessionId: session.sessionId, fresh: false };
  }

  /**
   * Results must answer calls the session's transcript holds unanswered (the client's functions
   * the model called): anything else would put a result where no call asked for it.
   */
  private async checkResults(target: StatelessTarget, results: ClientToolResult[]): Promise<void> {
    const open = target.sessionId
      ? await this.threads.openCalls(target.sessionId)
      : new Set<string>();
    const stray = results.find((r) => !open.has(r.toolCallId));
    if (stray) {
      throw apiError(
        "invalid_request",
        `Invalid request: tool_call_id ${stray.toolCallId} answers no tool call waiting in this session (send the results once, in the session whose reply asked for them).`,
      );
    }
  }
}

/** The `/v1` routes and the methods each takes (a 405 names them in `Allow`). */
const API_ROUTES: Record<string, string> = {
  "/v1/models": "GET",
  "/v1/models/:id{.+}": "GET",
  "/v1/chat/completions": "POST",
  "/v1/responses": "POST",
};
