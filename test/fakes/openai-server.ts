/**
 * A stand-in for an OpenAI-compatible chat completions server, on a real loopback socket, for
 * tests, the chaos harness and benchmarks. It speaks OpenAI's wire format (JSON and SSE chunks),
 * records every request body, and answers from a script: by default one keyed on simple phrases
 * in the last user message (see {@link defaultScript}). It also serves `/v1/audio/transcriptions`
 * (multipart, as the `openai` client sends it): the transcript is the audio's bytes read as text.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** A message as a client sent it (OpenAI chat format; content may be a string or parts). */
export interface FakeChatMessage {
  role: string;
  content?: string | null | Array<{ type: string; text?: string; image_url?: { url: string } }>;
  tool_calls?: Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

/** A parsed `POST /v1/chat/completions` body. */
export interface FakeChatRequest {
  model?: string;
  messages: FakeChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  tools?: Array<{ type: string; function: { name: string } }>;
  [key: string]: unknown;
}

/** A tool call the fake model makes; object arguments are sent as JSON text. */
export interface FakeToolCall {
  /** The tool call id to send (default: a fresh `call_fakeNNNNNN`). */
  id?: string;
  name: string;
  arguments: string | Record<string, unknown>;
}

/**
 * What the fake model does for one request. Fields combine: `delayMs` waits first (for streams,
 * after the response headers, as real servers do), then `text` and `toolCalls` are sent.
 * `error`, `hang` and `garbage` replace the normal answer.
 */
export interface FakeStep {
  text?: string;
  toolCalls?: FakeToolCall[];
  delayMs?: number;
  /**
   * The text in exactly these pieces, one content chunk each when streamed (instead of `text`,
   * which the stand-in splits into at most about 64): a long answer of many small deltas.
   */
  pieces?: string[];
  /** Streams only: wait this long before each content piece after the first, so a client sees the text grow. */
  chunkDelayMs?: number;
  /** Answer with this HTTP status and an OpenAI-style error JSON (and these headers, e.g. Retry-After). */
  error?: { status: number; message: string; code?: string; headers?: Record<string, string> };
  /** Hold the response open (for streams: after the headers) until the client goes away. */
  hang?: true;
  /** Send unparsable JSON (non-streaming) or a broken SSE frame (streaming), then end. */
  garbage?: true;
}

/** Computes the step for one request; may be async. */
export type FakeScript = (request: FakeChatRequest) => FakeStep | Promise<FakeStep>;

export interface FakeOpenAIOptions {
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string;
  /** Model id listed by `GET /v1/models` and echoed when a request names none (default "fake-model"). */
  model?: string;
  /**
   * The model's window in tokens: listed by `GET /v1/models` as `context_length`, and a request
   * whose prompt is larger (counted as the usage numbers are) gets OpenAI's 400
   * `context_length_exceeded`.
   */
  contextLength?: number;
  /** False: never report `usage` (as some compatible servers do), streamed or not. */
  usage?: boolean;
}

/** A running fake server. Close it in `afterEach`. */
export interface FakeOpenAI {
  /** Base URL for the `openai` client's `baseURL`, e.g. `http://127.0.0.1:40123/v1`. */
  readonly baseUrl: string;
  /** Every chat completions body received, in order (including failed and hung ones). */
  readonly requests: FakeChatRequest[];
  /**
   * Replaces how requests are answered: a step answers every request the same way, an array is
   * used one step per request and then falls back to {@link defaultScript}, and a function
   * computes each step (call `defaultScript(request)` inside it to keep the default phrases).
   */
  script(stepOrFn: FakeStep | FakeStep[] | FakeScript): void;
  /**
   * The next chat completions request gets this status: an OpenAI error JSON, or `body` as given
   * (a string is sent raw); `headers` go with it (e.g. `{"retry-after": "1"}`).
   */
  failNext(
    status: number,
    body?: string | Record<string, unknown>,
    headers?: Record<string, string>,
  ): void;
  /** The next chat completions request is held open until the client aborts it. */
  hangNext(): void;
  /** Every `/v1/audio/transcriptions` request, in order (failed ones included). */
  readonly transcriptions: FakeTranscription[];
  /** The next transcription request gets this HTTP status and an OpenAI error JSON. */
  failTranscriptionNext(status: number): void;
  /** Stops listening and drops every open connection (hung responses included). */
  close(): Promise<void>;
}

/** One transcription request as received. */
export interface FakeTranscription {
  model: string;
  filename: string;
  bytes: Buffer;
}

/** The URLs of the image parts of a request's messages (data URLs included), in order. */
export function imagePartsOf(request: FakeChatRequest): string[] {
  return request.messages.flatMap((m) =>
    Array.isArray(m.content)
      ? m.content.flatMap((p) => (p.type === "image_url" && p.image_url ? [p.image_url.url] : []))
      : [],
  );
}

const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
};

/** The text of the last `user` message (string content or joined text parts), or "". */
export function lastUserText(request: FakeChatRequest): string {
  const user = request.messages.findLast((m) => m.role === "user");
  return user ? contentText(user.content) : "";
}

/**
 * Tokens of a request as the fake counts them (its `usage.prompt_tokens` and its context limit):
 * a quarter of the characters of the messages and tools as JSON.
 */
export function fakePromptTokens(request: FakeChatRequest): number {
  return Math.ceil(
    (JSON.stringify(request.messages).length + JSON.stringify(request.tools ?? []).length) / 4,
  );
}

/** Every `remember: KEY=VALUE` fact in a text, in order, without repeats. */
function factsIn(text: string): string[] {
  return [
    ...new Set([...text.matchAll(/remember: ([A-Za-z0-9_-]+=[A-Za-z0-9_-]+)/g)].map((m) => m[1]!)),
  ];
}

/** All text of a request (system prompt, every message and tool result). */
function requestText(request: FakeChatRequest): string {
  return request.messages.map((m) => contentText(m.content)).join("\n");
}

/**
 * The default script. When the last message asks to "summarise" (a compaction request), the
 * reply is a summary that keeps every `remember: KEY=VALUE` fact found in the request.
 * Otherwise, on the last user message:
 * `echo: X` replies X; `run: CMD` calls `terminal {command: CMD}`, then replies
 * `ran: <first line of the tool output>`; `read: PATH` calls `read_file`, then replies with the
 * tool output; `write: PATH CONTENT` calls `write_file`, then replies `wrote: <first line>`;
 * `slow: MS X` waits MS ms, then replies X; `garbage` sends an unparsable response;
 * `recall: KEY` replies `recalled: VALUE` for a `remember: KEY=VALUE` anywhere in the request
 * (system prompt and summaries included), else `recalled: nothing`; `memorise: TEXT` calls
 * `memory {action: "add", text: TEXT}`, then replies `memorised: <first line>`; `big: N` calls
 * `terminal` to print N characters, then replies `big done`; anything else replies
 * `ok: <text>`. "Then" means: once a `tool` message follows that user message.
 */
export function defaultScript(request: FakeChatRequest): FakeStep {
  const last = request.messages.at(-1);
  if (last && /summari[sz]e/i.test(contentText(last.content))) {
    const facts = factsIn(requestText(request));
    return {
      text: `Summary of the earlier conversation.${facts.map((f) => ` remember: ${f}.`).join("")}`,
    };
  }
  // A task's child gets its request under a header naming the task (src/tasks/task-texts.ts).
  const text = lastUserText(request)
    .replace(/^\[Task \d+:[^\]]*\]\s*/, "")
    .trim();
  const recall = /^recall:\s*([A-Za-z0-9_-]+)$/.exec(text);
  if (recall) {
    const fact = factsIn(requestText(request)).findLast((f) => f.startsWith(`${recall[1]}=`));
    return { text: `recalled: ${fact ? fact.slice(recall[1]!.length + 1) : "nothing"}` };
  }
  const lastUser = request.messages.findLastIndex((m) => m.role === "user");
  const toolMessage = request.messages.slice(lastUser + 1).findLast((m) => m.role === "tool");
  const result = toolMessage ? contentText(toolMessage.content) : undefined;
  for (const [pattern, respond] of PHRASES) {
    const match = text.match(pattern);
    if (match) return respond(match.slice(1), result);
  }
  return { text: `ok: ${text}` };
}

const firstLine = (s: string) => s.split("\n", 1)[0] ?? "";

/** Phrase -> step, given the captured groups and the tool result that answers the phrase, if any. */
const PHRASES: ReadonlyArray<
  readonly [RegExp, (groups: string[], result: string | undefined) => FakeStep]
> = [
  [/^echo:\s?([\s\S]*)$/, ([x]) => ({ text: x })],
  [/^slow:\s*(\d+)\s?([\s\S]*)$/, ([ms, x]) => ({ delayMs: Number(ms), text: x })],
  [/^garbage$/, () => ({ garbage: true })],
  [
    // A sub-agent: waits for the child's answer (`delegate:`) or starts it in the background.
    /^(delegate|bg-delegate):\s?([\s\S]*)$/,
    ([how, task], result) =>
      result !== undefined
        ? { text: `delegated: ${firstLine(result)}` }
        : {
            toolCalls: [
              { name: "delegate", arguments: { task, background: how === "bg-delegate" } },
            ],
          },
  ],
  [
    /^memorise:\s?([\s\S]*)$/,
    ([text], result) =>
      result !== undefined
        ? { text: `memorised: ${firstLine(result)}` }
        : { toolCalls: [{ name: "memory", arguments: { action: "add", text } }] },
  ],
  [
    /^big:\s*(\d+)$/,
    ([n], result) =>
      result !== undefined
        ? { text: "big done" }
        : {
            toolCalls: [
              {
                name: "terminal",
                arguments: { command: `head -c ${Number(n)} /dev/zero | tr '\\0' x` },
              },
            ],
          },
  ],
  [
    /^run:\s?([\s\S]*)$/,
    ([command], result) =>
      result !== undefined
        ? { text: `ran: ${firstLine(result)}` }
        : { toolCalls: [{ name: "terminal", arguments: { command } }] },
  ],
  [
    /^read:\s?(.*)$/,
    ([path], result) =>
      result !== undefined
        ? { text: result }
        : { toolCalls: [{ name: "read_file", arguments: { path } }] },
  ],
  [
    /^write:\s?(\S+)\s([\s\S]*)$/,
    ([path, content], result) =>
      result !== undefined
        ? { text: `wrote: ${firstLine(result)}` }
        : { toolCalls: [{ name: "write_file", arguments: { path, content } }] },
  ],
];

/** Starts the fake on 127.0.0.1, port 0. */
export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const model = options.model ?? "fake-model";
  const requests: FakeChatRequest[] = [];
  const overrides: Array<{
    step: FakeStep;
    status: number;
    rawBody?: string | Record<string, unknown>;
    headers?: Record<string, string>;
  }> = [];
  let responder: FakeScript = defaultScript;
  const transcriptions: FakeTranscription[] = [];
  const transcriptionFailures: number[] = [];

  async function transcribe(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readRawBody(req);
    const fields = parseMultipartFields(body, req.headers["content-type"] ?? "");
    const file = fields.file;
    const model = fields.model?.data.toString("utf8") ?? "";
    transcriptions.push({
      model,
      filename: file?.filename ?? "",
      bytes: file?.data ?? Buffer.alloc(0),
    });
    const status = transcriptionFailures.shift();
    if (status !== undefined)
      return sendError(res, status, `Transcription failed (fake ${status}).`);
    if (!file || !model) return sendError(res, 400, "file and model are required");
    sendJson(res, 200, { text: file.data.toString("utf8") });
  }
  let queue: FakeStep[] = [];
  let counter = 0;
  const nextId = () => (++counter).toString().padStart(6, "0");

  async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Registered first: the client may go away while the script is still deciding.
    const gone = new AbortController();
    res.on("close", () => gone.abort());
    let body: FakeChatRequest;
    try {
      body = JSON.parse(await readBody(req)) as FakeChatRequest;
      if (!Array.isArray(body.messages)) throw new Error("messages must be an array");
    } catch (error) {
      sendError(res, 400, `Invalid request body: ${(error as Error).message}`);
      return;
    }
    requests.push(body);
    const override = overrides.shift();
    if (override?.rawBody !== undefined) {
      return sendRaw(res, override.status, override.rawBody, override.headers);
    }
    if (!override && options.contextLength !== undefined) {
      const tokens = fakePromptTokens(body);
      if (tokens > options.contextLength) {
        const message =
          `This model's maximum context length is ${options.contextLength} tokens. ` +
          `However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`;
        return sendError(res, 400, message, "invalid_request_error", "context_length_exceeded");
      }
    }
    const step = override?.step ?? queue.shift() ?? (await responder(body));
    await answer(res, body, step, {
      model,
      nextId,
      gone: gone.signal,
      usage: options.usage !== false,
    });
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      sendError(
        res,
        401,
        "Incorrect API key provided.",
        "invalid_request_error",
        "invalid_api_key",
      );
    } else if (req.method === "GET" && path === "/v1/models") {
      sendJson(res, 200, {
        object: "list",
        data: [
          {
            id: model,
            object: "model",
            created: 1_700_000_000,
            owned_by: "keel-fake",
            ...(options.contextLength !== undefined && { context_length: options.contextLength }),
          },
        ],
      });
    } else if (req.method === "POST" && path === "/v1/audio/transcriptions") {
      transcribe(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, `Fake server error: ${String(error)}`);
      });
    } else if (req.method === "POST" && path === "/v1/chat/completions") {
      chatCompletions(req, res).catch((error: unknown) => {
        if (!res.headersSent) sendError(res, 500, `Fake server error: ${String(error)}`);
        else res.destroy();
      });
    } else {
      sendError(res, 404, `Unknown route ${req.method} ${path}`, "invalid_request_error");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    transcriptions,
    failTranscriptionNext(status) {
      transcriptionFailures.push(status);
    },
    script(stepOrFn) {
      queue = [];
      if (typeof stepOrFn === "function") responder = stepOrFn;
      else if (Array.isArray(stepOrFn)) {
        responder = defaultScript;
        queue = [...stepOrFn];
      } else responder = () => stepOrFn;
    },
    failNext(status, body, headers) {
      const message = `The server had an error while processing your request (fake ${status}).`;
      overrides.push({
        step: { error: { status, message, ...(headers && { headers }) } },
        status,
        ...(body !== undefined && { rawBody: body }),
        ...(headers && { headers }),
      });
    },
    hangNext() {
      overrides.push({ step: { hang: true }, status: 200 });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface AnswerContext {
  model: string;
  nextId: () => string;
  /** Aborted when the client disconnects. */
  gone: AbortSignal;
  /** Report usage (when the request asks for it, in streams). */
  usage: boolean;
}

async function answer(
  res: ServerResponse,
  request: FakeChatRequest,
  step: FakeStep,
  context: AnswerContext,
): Promise<void> {
  if (step.error) {
    const { status, message, code, headers } = step.error;
    const type = status >= 500 ? "server_error" : "invalid_request_error";
    return sendError(res, status, message, type, code ?? null, headers);
  }
  const { gone } = context;
  const stream = request.stream === true;
  if (stream) {
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();
  }
  if (step.hang) {
    await waitUntilAborted(gone);
    return;
  }
  if (step.delayMs && !(await pause(step.delayMs, gone))) return;
  if (step.garbage) {
    if (stream) res.end('data: {"id":"chatcmpl-broken","object":"chat.completion.chunk","choi\n\n');
    else sendRaw(res, 200, '{"id":"chatcmpl-broken","choices":[{"message":');
    return;
  }
  const reply = buildReply(step, request, context);
  if (stream) {
    const usage = context.usage && request.stream_options?.include_usage === true;
    await writeChunks(res, reply, usage, step.chunkDelayMs ?? 0, gone);
  } else sendJson(res, 200, completionBody(reply));
}

interface Reply {
  id: string;
  created: number;
  model: string;
  text: string | null;
  /** How a stream sends the text, when the step gave its pieces. */
  pieces?: string[];
  toolCalls: Array<{ id: string; name: string; arguments: string }>;
  finishReason: "stop" | "tool_calls";
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
}

function buildReply(step: FakeStep, request: FakeChatRequest, context: AnswerContext): Reply {
  const toolCalls = (step.toolCalls ?? []).map((call) => ({
    id: call.id ?? `call_fake${context.nextId()}`,
    name: call.name,
    arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
  }));
  const text = step.pieces?.join("") ?? step.text ?? (toolCalls.length > 0 ? null : "");
  const completionChars =
    (text ?? "").length + toolCalls.reduce((n, c) => n + c.arguments.length, 0);
  const prompt_tokens = fakePromptTokens(request);
  const completion_tokens = Math.ceil(completionChars / 4);
  return {
    id: `chatcmpl-fake${context.nextId()}`,
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? context.model,
    text,
    ...(step.pieces && { pieces: step.pieces }),
    toolCalls,
    finishReason: toolCalls.length > 0 ? "tool_calls" : "stop",
    usage: { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens },
  };
}

function completionBody(reply: Reply): Record<string, unknown> {
  const message: Record<string, unknown> = {
    role: "assistant",
    content: reply.text,
    refusal: null,
    annotations: [],
  };
  if (reply.toolCalls.length > 0) {
    message.tool_calls = reply.toolCalls.map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.name, arguments: c.arguments },
    }));
  }
  return {
    id: reply.id,
    object: "chat.completion",
    created: reply.created,
    model: reply.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: reply.finishReason }],
    usage: reply.usage,
    service_tier: "default",
    system_fingerprint: "fp_keel_fake",
  };
}

/** Streams a reply as OpenAI does: a role chunk, content pieces, tool call headers and argument pieces, a finish chunk. */
async function writeChunks(
  res: ServerResponse,
  reply: Reply,
  includeUsage: boolean,
  chunkDelayMs: number,
  gone: AbortSignal,
): Promise<void> {
  const frame = (delta: Record<string, unknown>, finish: string | null = null) => {
    const chunk = {
      id: reply.id,
      object: "chat.completion.chunk",
      created: reply.created,
      model: reply.model,
      system_fingerprint: "fp_keel_fake",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      ...(includeUsage ? { usage: null } : {}),
    };
    if (!res.destroyed) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  frame({ role: "assistant", content: reply.text === null ? null : "", refusal: null });
  for (const [index, piece] of (reply.pieces ?? splitText(reply.text ?? "")).entries()) {
    if (index > 0 && chunkDelayMs > 0 && !(await pause(chunkDelayMs, gone))) return;
    frame({ content: piece });
  }
  reply.toolCalls.forEach((call, index) => {
    frame({
      tool_calls: [
        { index, id: call.id, type: "function", function: { name: call.name, arguments: "" } },
      ],
    });
    for (const piece of splitText(call.arguments)) {
      frame({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  });
  frame({}, reply.finishReason);
  if (includeUsage && !res.destroyed) {
    const usageChunk = {
      id: reply.id,
      object: "chat.completion.chunk",
      created: reply.created,
      model: reply.model,
      system_fingerprint: "fp_keel_fake",
      choices: [],
      usage: reply.usage,
    };
    res.write(`data: ${JSON.stringify(usageChunk)}\n\n`);
  }
  if (!res.destroyed) res.end("data: [DONE]\n\n");
}

/** Splits into several pieces (at least 3 when long enough, at most about 64) so clients must reassemble. */
function splitText(text: string): string[] {
  if (text.length === 0) return [];
  const size = Math.max(1, Math.min(5, Math.ceil(text.length / 3)), Math.ceil(text.length / 64));
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

function contentText(content: FakeChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => p.text ?? "").join("");
  return "";
}

function readRawBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** The parts of a multipart/form-data body by field name, with their bytes and file name. */
function parseMultipartFields(
  body: Buffer,
  contentType: string,
): Record<string, { filename?: string; data: Buffer }> {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  const fields: Record<string, { filename?: string; data: Buffer }> = {};
  if (!boundary) return fields;
  const delimiter = `--${boundary[1] ?? boundary[2]}`;
  for (const part of body.toString("latin1").split(delimiter)) {
    const headerEnd = part.indexOf("\r\n\r\n");
    if (headerEnd < 0) continue;
    const headers = part.slice(0, headerEnd);
    const name = /name="([^"]*)"/.exec(headers);
    if (!name) continue;
    const filename = /filename="([^"]*)"/.exec(headers);
    const data = Buffer.from(part.slice(headerEnd + 4).replace(/\r\n$/, ""), "latin1");
    fields[name[1]!] = { ...(filename && { filename: filename[1]! }), data };
  }
  return fields;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Resolves true after `ms`, or false as soon as the client disconnects. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

function waitUntilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) =>
    signal.addEventListener("abort", () => resolve(), { once: true }),
  );
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function sendRaw(
  res: ServerResponse,
  status: number,
  body: string | Record<string, unknown>,
  headers: Record<string, string> = {},
): void {
  if (typeof body !== "string") {
    sendJson(res, status, body, headers);
    return;
  }
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...headers });
  res.end(body);
}

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  type = status >= 500 ? "server_error" : "invalid_request_error",
  code: string | null = null,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, { error: { message, type, param: null, code } }, headers);
}
