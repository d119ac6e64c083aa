/** OpenAI chat-completions wire shapes: the request we accept and the responses we produce. */
import { z } from "zod";

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

const WireMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
});

export const ChatCompletionRequest = z.looseObject({
  model: z.string().optional(),
  messages: z.array(WireMessage).min(1, "messages must not be empty"),
  stream: z.boolean().optional(),
});

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;
type WireMessage = z.infer<typeof WireMessage>;

/** Text of a message whose content is a string or an array of text parts. */
export function messageText(m: WireMessage): string {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) return m.content.map((p) => p.text ?? "").join("");
  return "";
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

export function completionBody(id: string, model: string, created: number, text: string) {
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
    usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
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
