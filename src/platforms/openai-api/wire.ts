/** OpenAI chat-completions wire shapes: the request we accept and the responses we produce. */
import { z } from "zod";
import type { TurnUsage } from "../platform.js";

const ContentPart = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  image_url: z.union([z.string(), z.looseObject({ url: z.string() })]).optional(),
});

const WireMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
});

export const ChatCompletionRequest = z.looseObject({
  model: z.string().optional(),
  messages: z.array(WireMessage).min(1, "messages must not be empty"),
  stream: z.boolean().optional(),
  n: z.number().int().min(1).nullable().optional(),
});

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
) {
  return {
    id,
    object: "chat.completion",
    created,
    model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: text, refusal: null },
        logprobs: null,
        finish_reason: "stop",
      },
    ],
    usage: usageBody(usage),
  };
}

export function chunkBody(
  id: string,
  model: string,
  created: number,
  delta: { role?: "assistant"; content?: string },
  finishReason: "stop" | null,
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
