/**
 * OpenAI's Responses API, the minimal part SDKs use by default (the Vercel AI SDK's
 * `@ai-sdk/openai`, `client.responses` of the official one): text and image input, one message
 * of output text, streamed as the Responses API's events, `previous_response_id` continuing the
 * session. A response id names its session, so a later request can continue it.
 */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { TurnUsage } from "../../contract/platform.js";

const InputPart = z.looseObject({
  type: z.string(),
  text: z.string().optional(),
  image_url: z.string().nullable().optional(),
});

const InputItem = z.looseObject({
  type: z.literal("message").optional(),
  role: z.enum(["system", "developer", "user", "assistant"]),
  content: z.union([z.string(), z.array(InputPart)]),
});

export const ResponsesRequest = z.looseObject({
  model: z.string().optional(),
  input: z.union([z.string().min(1, "input must not be empty"), z.array(InputItem).min(1)]),
  instructions: z.string().nullable().optional(),
  stream: z.boolean().optional(),
  previous_response_id: z.string().nullable().optional(),
  tools: z.array(z.unknown()).optional(),
});

export type ResponsesRequest = z.infer<typeof ResponsesRequest>;
type InputItem = z.infer<typeof InputItem>;

/** The request's messages in chat-completions shape (what the rest of the API reads). */
export function chatMessagesOf(request: ResponsesRequest):
  | {
      ok: true;
      messages: {
        role: "system" | "developer" | "user" | "assistant";
        content: string | { type: string; text?: string; image_url?: { url: string } }[];
      }[];
    }
  | { ok: false; error: string } {
  const items: InputItem[] =
    typeof request.input === "string" ? [{ role: "user", content: request.input }] : request.input;
  const messages = [];
  if (request.instructions)
    messages.push({ role: "system" as const, content: request.instructions });
  for (const [index, item] of items.entries()) {
    if (typeof item.content === "string") {
      messages.push({ role: item.role, content: item.content });
      continue;
    }
    const parts = [];
    for (const [p, part] of item.content.entries()) {
      if (part.type === "input_text" || part.type === "output_text") {
        parts.push({ type: "text", text: part.text ?? "" });
      } else if (part.type === "input_image" && part.image_url) {
        parts.push({ type: "image_url", image_url: { url: part.image_url } });
      } else {
        return {
          ok: false,
          error: `input.${index}.content.${p}: unsupported part type "${part.type}" (text and images are taken)`,
        };
      }
    }
    messages.push({ role: item.role, content: parts });
  }
  return { ok: true, messages };
}

/** A response id that names its session: `resp_<session id>_<random>`. */
export function responseIdFor(sessionId: string): string {
  return `resp_${sessionId}_${randomBytes(6).toString("hex")}`;
}

/** The session a response id names, or null for an id this gateway did not make. */
export function sessionOfResponseId(id: string): string | null {
  return /^resp_(.+)_[0-9a-f]{12}$/.exec(id)?.[1] ?? null;
}

export function messageItemId(): string {
  return `msg_${randomBytes(12).toString("hex")}`;
}

export interface ResponseMeta {
  id: string;
  messageId: string;
  model: string;
  createdAt: number;
  previousResponseId: string | null;
}

function usageOf(usage: TurnUsage | undefined) {
  const input_tokens = usage?.promptTokens ?? 0;
  const output_tokens = usage?.completionTokens ?? 0;
  return {
    input_tokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input_tokens + output_tokens,
  };
}

function outputText(text: string) {
  return { type: "output_text" as const, text, annotations: [] };
}

export function messageItem(meta: ResponseMeta, text: string, done: boolean) {
  return {
    type: "message" as const,
    id: meta.messageId,
    status: done ? ("completed" as const) : ("in_progress" as const),
    role: "assistant" as const,
    content: done ? [outputText(text)] : [],
  };
}

/** The response object; `text` null while it is in progress. */
export function responseBody(
  meta: ResponseMeta,
  state:
    | { status: "in_progress" }
    | { status: "completed"; text: string; usage?: TurnUsage }
    | { status: "failed"; error: { code: string | null; message: string } },
) {
  return {
    id: meta.id,
    object: "response" as const,
    created_at: meta.createdAt,
    status: state.status,
    model: meta.model,
    output: state.status === "completed" ? [messageItem(meta, state.text, true)] : [],
    ...(state.status === "completed" && { output_text: state.text }),
    error: state.status === "failed" ? state.error : null,
    incomplete_details: null,
    previous_response_id: meta.previousResponseId,
    parallel_tool_calls: false,
    tools: [],
    usage: state.status === "completed" ? usageOf(state.usage) : null,
  };
}

/** The events of one streamed answer, numbered as the Responses API numbers them. */
export class ResponseEvents {
  private sequence = 0;
  constructor(private readonly meta: ResponseMeta) {}

  private event<T extends object>(type: string, body: T) {
    return { type, sequence_number: this.sequence++, ...body };
  }

  created() {
    return this.event("response.created", {
      response: responseBody(this.meta, { status: "in_progress" }),
    });
  }

  itemAdded() {
    return this.event("response.output_item.added", {
      output_index: 0,
      item: messageItem(this.meta, "", false),
    });
  }

  partAdded() {
    return this.event("response.content_part.added", {
      item_id: this.meta.messageId,
      output_index: 0,
      content_index: 0,
      part: outputText(""),
    });
  }

  delta(text: string) {
    return this.event("response.output_text.delta", {
      item_id: this.meta.messageId,
      output_index: 0,
      content_index: 0,
      delta: text,
    });
  }

  /** The events that close the message and complete the response. */
  completed(text: string, usage: TurnUsage | undefined) {
    const at = { item_id: this.meta.messageId, output_index: 0, content_index: 0 };
    return [
      this.event("response.output_text.done", { ...at, text }),
      this.event("response.content_part.done", { ...at, part: outputText(text) }),
      this.event("response.output_item.done", {
        output_index: 0,
        item: messageItem(this.meta, text, true),
      }),
      this.event("response.completed", {
        response: responseBody(this.meta, { status: "completed", text, usage }),
      }),
    ];
  }

  failed(code: string | null, message: string) {
    return this.event("response.failed", {
      response: responseBody(this.meta, { status: "failed", error: { code, message } }),
    });
  }
}
