/**
 * The model endpoint: OpenAI-compatible chat completions through the official `openai` client,
 * always streamed, with every failure turned into a value.
 */
import type OpenAI from "openai";
import { errorMessage } from "../lib/errors.js";
import { createNodeFetch } from "../lib/node-fetch.js";
import { savedImageNote } from "./image-input.js";
import { loadOpenAiSdk, type OpenAiSdk, openAiClient } from "./openai-client.js";
import type {
  AssistantMessage,
  ChatMessage,
  LlmClient,
  LlmFailureKind,
  LlmRequest,
  LlmResult,
  TokenUsage,
  ToolCall,
} from "./types.js";

export interface LlmClientOptions {
  /** OpenAI-compatible base URL, ending with `/v1` as the `openai` client expects. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer`; local endpoints without auth may leave it unset. */
  apiKey?: string;
  model: string;
  /** A whole call (connect, wait and stream) is abandoned after this long. */
  timeoutMs: number;
  /** Loads the `openai` package (default: a dynamic import; tests give one that fails). */
  loadSdk?: () => Promise<OpenAiSdk>;
}

type Failure = Extract<LlmResult, { ok: false }>;

/** The loaded SDK: its error classes, and the client for this model. */
interface Sdk {
  OpenAI: typeof OpenAI;
  client: OpenAI;
}

/** Tool call fragments gathered by `index` while the stream runs. */
interface PartialToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * Creates a client for one model. `complete()` streams one chat completion and never throws for
 * HTTP errors, timeouts, aborts, network failures or unusable output: it returns
 * `{ ok: false, kind }`. It never retries: the caller decides.
 */
export function createLlmClient(options: LlmClientOptions): LlmClient {
  // The SDK loads with the first call, not with every start. A load that failed (a file
  // replaced by an upgrade, too many open files) is tried again by the next call.
  let sdk: Promise<Sdk> | undefined;
  const loadSdk = () => {
    sdk ??= (options.loadSdk ?? loadOpenAiSdk)().then(
      (loaded) => ({
        OpenAI: loaded.default,
        client: openAiClient(loaded, {
          baseUrl: options.baseUrl,
          apiKey: options.apiKey,
          maxRetries: 0,
          fetch: createNodeFetch(),
          // Our own timer covers the whole call; this one is only a backstop.
          timeoutMs: Math.ceil(options.timeoutMs) + 5_000,
        }),
      }),
      (error: unknown) => {
        sdk = undefined;
        throw error;
      },
    );
    return sdk;
  };
  const secrets = [options.apiKey].filter((s): s is string => Boolean(s));

  return {
    async complete(input: LlmRequest): Promise<LlmResult> {
      const controller = new AbortController();
      const onAbort = () => controller.abort();
      input.signal.addEventListener("abort", onAbort, { once: true });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, options.timeoutMs);
      const interrupted = (): Failure | undefined => {
        if (input.signal.aborted) return fail("aborted", "The model request was interrupted.");
        if (timedOut) {
          const seconds = Math.round(options.timeoutMs / 100) / 10;
          return fail("timeout", `The model did not answer within ${seconds} s.`);
        }
        return undefined;
      };
      let loaded: Sdk | undefined;
      try {
        if (input.signal.aborted) return interrupted()!;
        loaded = await loadSdk();
        const result = await streamCompletion(
          loaded.client,
          options.model,
          input,
          controller.signal,
        );
        // The client ends an aborted stream quietly, so a short result may really be an abort.
        return interrupted() ?? result;
      } catch (error) {
        return interrupted() ?? describeError(error, secrets, loaded?.OpenAI);
      } finally {
        clearTimeout(timer);
        input.signal.removeEventListener("abort", onAbort);
      }
    },
  };
}

async function streamCompletion(
  client: OpenAI,
  model: string,
  input: LlmRequest,
  signal: AbortSignal,
): Promise<LlmResult> {
  const stream = await client.chat.completions.create(
    {
      model,
      messages: input.messages.map(toWireMessage),
      ...(input.tools.length > 0 ? { tools: input.tools } : {}),
      stream: true,
      // The prompt size of this call is what the context budget trusts (see src/context/).
      stream_options: { include_usage: true },
    },
    { signal },
  );
  let text = "";
  let finishReason: string | null = null;
  let usage: TokenUsage | undefined;
  const calls = new Map<number, PartialToolCall>();
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage = {
        promptTokens: chunk.usage.prompt_tokens,
        completionTokens: chunk.usage.completion_tokens,
        estimated: false,
      };
    }
    const choice = chunk.choices?.[0];
    if (!choice) continue;
    if (choice.finish_reason) finishReason = choice.finish_reason;
    const delta = choice.delta;
    if (!delta) continue;
    if (typeof delta.content === "string" && delta.content.length > 0) {
      text += delta.content;
      input.onTextDelta?.(delta.content);
    }
    for (const fragment of delta.tool_calls ?? []) addFragment(calls, fragment);
  }
  const result = finishMessage(text, calls, finishReason);
  return result.ok && usage ? { ...result, usage } : result;
}

function addFragment(
  calls: Map<number, PartialToolCall>,
  fragment: OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta.ToolCall,
): void {
  const index = fragment.index ?? calls.size;
  const call = calls.get(index) ?? { id: "", name: "", arguments: "" };
  calls.set(index, call);
  if (fragment.id) call.id = fragment.id;
  const name = fragment.function?.name;
  // OpenAI sends the name once; some compatible servers repeat it in every fragment.
  if (name && name !== call.name) call.name += name;
  if (fragment.function?.arguments) call.arguments += fragment.function.arguments;
}

function finishMessage(
  text: string,
  calls: Map<number, PartialToolCall>,
  finishReason: string | null,
): LlmResult {
  const toolCalls: ToolCall[] = [];
  for (const [index, call] of [...calls.entries()].sort((a, b) => a[0] - b[0])) {
    if (!call.name) return fail("invalid", "The model sent a tool call without a tool name.");
    toolCalls.push({
      id: call.id || `call_keel_${index}_${Date.now().toString(36)}`,
      type: "function",
      function: { name: call.name, arguments: call.arguments || "{}" },
    });
  }
  if (text.length === 0 && toolCalls.length === 0) {
    return fail("invalid", "The model returned an empty response.");
  }
  const message: AssistantMessage = { role: "assistant", content: text.length > 0 ? text : null };
  if (toolCalls.length > 0) message.tool_calls = toolCalls;
  return { ok: true, message, finishReason };
}

function toWireMessage(message: ChatMessage): OpenAI.Chat.Completions.ChatCompletionMessageParam {
  if (message.role === "user") {
    if (typeof message.content === "string") return { role: "user", content: message.content };
    // Saved images are resolved before a request (image-input.ts); one left here is a note.
    const content = message.content.map(
      (part): OpenAI.Chat.Completions.ChatCompletionContentPart =>
        part.type === "saved_image" ? { type: "text", text: savedImageNote(part.path) } : part,
    );
    return { role: "user", content };
  }

  if (message.role !== "assistant") return message;
  const wire: OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam = {
    role: "assistant",
    content: message.content,
  };
  if (message.tool_calls && message.tool_calls.length > 0) {
    wire.tool_calls = message.tool_calls.map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.function.name, arguments: c.function.arguments },
    }));
  }
  return wire;
}

/** `OpenAI` is undefined only when the SDK itself failed to load (a broken install). */
function describeError(
  error: unknown,
  secrets: string[],
  OpenAI: typeof import("openai").default | undefined,
): Failure {
  if (!OpenAI) return fail("invalid", `The model client could not load: ${errorMessage(error)}.`);
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return fail("timeout", "The model did not answer in time.");
  }
  if (error instanceof OpenAI.APIUserAbortError) {
    return fail("aborted", "The model request was interrupted.");
  }
  if (error instanceof OpenAI.APIConnectionError) {
    const code = errorCode(error.cause);
    return fail("network", `Could not reach the model endpoint${code ? ` (${code})` : ""}.`);
  }
  if (error instanceof OpenAI.APIError) {
    const detail = serverDetail(error, secrets);
    if (error.status === undefined) {
      return fail("http", `The model endpoint reported an error${detail}.`);
    }
    const kind = isContextOverflow(error) ? "context_exceeded" : "http";
    const retryAfterMs = parseRetryAfter(error.headers?.get?.("retry-after") ?? null, Date.now());
    return {
      ...fail(kind, `The model endpoint answered HTTP ${error.status}${detail}.`),
      status: error.status,
      ...(retryAfterMs !== undefined && { retryAfterMs }),
    };
  }
  if (error instanceof SyntaxError) {
    return fail("invalid", "The model endpoint sent a response that could not be parsed.");
  }
  // undici reports a connection cut mid-body as a TypeError ("terminated").
  if (error instanceof TypeError) {
    return fail("network", "The connection to the model endpoint broke during the response.");
  }
  return fail("invalid", "The model endpoint sent an unusable response.");
}

/** OpenAI's `context_length_exceeded`, or the wording compatible servers (vLLM, llama.cpp) use. */
function isContextOverflow(error: InstanceType<typeof OpenAI.APIError>): boolean {
  if (error.status !== 400 && error.status !== 413) return false;
  if (error.code === "context_length_exceeded") return true;
  const body = error.error as { message?: unknown } | undefined;
  const message = typeof body?.message === "string" ? body.message : "";
  return /context length|context window|maximum context|too many tokens|prompt is too long/i.test(
    message,
  );
}

/** `Retry-After` as seconds or an HTTP date, in milliseconds from `now`; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The server's own error message, shortened and with secrets removed, as ": message". */
function serverDetail(error: InstanceType<typeof OpenAI.APIError>, secrets: string[]): string {
  const body = error.error as { message?: unknown } | undefined;
  let message = typeof body?.message === "string" ? body.message : "";
  for (const secret of secrets) message = message.split(secret).join("***");
  message = message.replace(/\b(sk|key|token)[-_][A-Za-z0-9_-]{6,}/gi, "***").replace(/\s+/g, " ");
  message = message.trim();
  if (message.length === 0) return "";
  return `: ${message.length > 160 ? `${message.slice(0, 157)}...` : message}`;
}

function errorCode(cause: unknown): string | undefined {
  let current = cause;
  for (let depth = 0; depth < 3 && current instanceof Error; depth++) {
    const code = (current as Error & { code?: unknown }).code;
    if (typeof code === "string") return code;
    current = current.cause;
  }
  return undefined;
}

function fail(kind: LlmFailureKind, error: string): Failure {
  return { ok: false, kind, error };
}
