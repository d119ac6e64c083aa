/** OpenAI chat-completions wire shapes: the request we accept and the responses we produce. */
import { z } from "zod";
import type {
  ClientToolCall,
  ClientToolResult,
  ClientToolSpec,
  TurnUsage,
} from "../../contract/platform.js";

const ContentPart = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  image_url: z.union([z.string(), z.looseObject({ url: z.string() })]).optional(),
});

const WireToolCall = z.looseObject({
  id: z.string(),
  type: z.literal("function").optional(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});

const WireMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  tool_calls: z.array(WireToolCall).nullable().optional(),
  tool_call_id: z.string().optional(),
});

/** A function the client defines (OpenAI's `tools` entry); the names the model may call. */
const WireTool = z.looseObject({
  type: z.literal("function"),
  function: z.looseObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, "must be 1 to 64 letters, digits, underscores or dashes"),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

export const ChatCompletionRequest = z.looseObject({
  model: z.string().optional(),
  messages: z.array(WireMessage).min(1, "messages must not be empty"),
  stream: z.boolean().optional(),
  n: z.number().int().min(1).nullable().optional(),
  tools: z.array(WireTool).optional(),
});

/** The client's functions as the model is offered them. */
export function clientToolsOf(request: ChatCompletionRequest): ClientToolSpec[] {
  return (request.tools ?? []).map((tool) => ({
    type: "function",
    function: {
      name: tool.function.name,
      ...(tool.function.description !== undefined && { description: tool.function.description }),
      ...(tool.function.parameters !== undefined && { parameters: tool.function.parameters }),
    },
  }));
}

/**
 * The results a request ends with (its trailing `tool` messages), checked against the assistant
 * message before them: each must answer one of its calls. Empty when the request ends otherwise.
 */
export function trailingToolResults(
  messages: WireMessage[],
): { ok: true; results: ClientToolResult[] } | { ok: false; error: string } {
  let start = messages.length;
  while (start > 0 && messages[start - 1]!.role === "tool") start--;
  if (start === messages.length) return { ok: true, results: [] };
  const asking = messages[start - 1];
  const asked = new Set(
    (asking?.role === "assistant" && asking.tool_calls?.map((c) => c.id)) || [],
  );
  const results: ClientToolResult[] = [];
  for (const [offset, m] of messages.slice(start).entries()) {
    const where = `messages.${start + offset}`;
    if (!m.tool_call_id) return { ok: false, error: `${where}: a tool message needs tool_call_id` };
    if (!asked.has(m.tool_call_id)) {
      return {
        ok: false,
        error: `${where}: tool_call_id ${m.tool_call_id} answers no tool call of the assistant message before it`,
      };
    }
    results.push({ toolCallId: m.tool_call_id, content: messageText(m) });
  }
  return { ok: true, results };
}

/** The texts of a request's user messages, in order: what names a stateless conversation. */
export function userTexts(messages: WireMessage[]): string[] {
  return messages.filter((m) => m.role === "user").map((m) => messageText(m));
}

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;
type WireMessage = z.infer<typeof WireMessage>;

/** Text of a message whose content is a string or an array of text parts. */
export function messageText(m: WireMessage): string {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) return m.content.map((p) => p.text ?? "").join("");
  return "";
}

/** Image types a data URL may carry (the ones models take). */
const DATA_URL = /^data:(image\/(?:png|jpeg|gif|webp));base64,[A-Za-z0-9+/=\s]+$/;

/**
 * The images of a message's `image_url` parts: data URLs of common image types or https URLs.
 * Anything else is an error naming the part, so nothing a client sent is dropped silently.
 */
export function imagesOf(
  m: WireMessage,
): { ok: true; images: { url: string; mime?: string }[] } | { ok: false; error: string } {
  if (!Array.isArray(m.content)) return { ok: true, images: [] };
  const images: { url: string; mime?: string }[] = [];
  for (const [index, part] of m.content.entries()) {
    if (part.type === "text") continue;
    if (part.type !== "image_url") {
      return { ok: false, error: `content part ${index} has unsupported type "${part.type}"` };
    }
    const url = typeof part.image_url === "string" ? part.image_url : part.image_url?.url;
    const data = url ? DATA_URL.exec(url) : null;
    if (data) images.push({ url: url!, mime: data[1]! });
    else if (url?.startsWith("https://")) images.push({ url });
    else {
      return {
        ok: false,
        error: `content part ${index}: image_url must be an https URL or a base64 data URL of a PNG, JPEG, GIF or WebP image`,
      };
    }
  }
  return { ok: true, images };
}

/** Earlier messages of a stateless request, as transcript messages (tool traffic is dropped). */
export function historyOf(
  messages: WireMessage[],
): { role: "user" | "assistant" | "system"; content: string }[] {
  const out: { role: "user" | "assistant" | "system"; content: string }[] = [];
  for (const m of messages) {
    const role = m.role === "developer" ? "system" : m.role;
    if (role === "tool") continue;
    out.push({ role, content: messageText(m) });
  }
  return out;
}

/** OpenAI's `usage` object for a turn's tokens (zeros when unknown, e.g. a command's notice). */
export function usageBody(usage: TurnUsage | undefined) {
  const prompt_tokens = usage?.promptTokens ?? 0;
  const completion_tokens = usage?.completionTokens ?? 0;
  return { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
}

export function completionBody(
  id: string,
  model: string,
  created: number,
  text: string,
  usage?: TurnUsage,
  toolCalls?: ClientToolCall[],
) {
  const calls = toolCalls?.length ? toolCalls : null;
  return {
    id,
    object: "chat.completion",
    created,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: calls && !text ? null : text,
          refusal: null,
          ...(calls && { tool_calls: calls.map(wireToolCall) }),
        },
        logprobs: null,
        finish_reason: calls ? "tool_calls" : "stop",
      },
    ],
    usage: usageBody(usage),
  };
}

/** A call to a client's function as OpenAI sends it. */
export function wireToolCall(call: ClientToolCall) {
  return {
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  };
}

export function chunkBody(
  id: string,
  model: string,
  created: number,
  delta: {
    role?: "assistant";
    content?: string;
    tool_calls?: (ReturnType<typeof wireToolCall> & { index: number })[];
  },
  finishReason: "stop" | "tool_calls" | null,
) {
  return {
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  };
}

/** OpenAI's error envelope, so SDKs surface the message. */
export function errorBody(message: string, type: string, code: string | null = null) {
  return { error: { message, type, param: null, code } };
}
