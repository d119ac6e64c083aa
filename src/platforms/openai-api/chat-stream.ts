/** The chunks of a streamed chat completion: the role first, text, Keel's tool events, the end. */
import type { BoundedSse } from "./bounded-stream.js";
import { type Completion, failureOf } from "./outcomes.js";
import type { ToolStarted } from "./turn-waiters.js";
import { chunkBody, usageBody, wireToolCall } from "./wire.js";

/** What every response to one request carries. */
export interface ResponseMeta {
  id: string;
  model: string;
  created: number;
  /** The client asked for `stream_options.include_usage`. */
  includeUsage?: boolean;
}

/** The end of a stream: the text unless it was streamed already, or an error event. */
export async function endChatStream(
  out: BoundedSse,
  meta: ResponseMeta,
  done: Completion,
  streamed: boolean,
): Promise<void> {
  const failure = failureOf(done);
  if (failure) {
    await out.send(JSON.stringify(failure.body));
  } else if (!streamed && done.kind === "reply" && done.text) {
    // Text that came without deltas: a notice, a repeat, or a reply the model sent in one piece.
    await out.send(
      JSON.stringify(chunkBody(meta.id, meta.model, meta.created, { content: done.text }, null)),
    );
  }
  const calls = done.kind === "reply" ? (done.toolCalls ?? []) : [];
  if (calls.length > 0) {
    const tool_calls = calls.map((call, index) => ({ index, ...wireToolCall(call) }));
    await out.send(
      JSON.stringify(chunkBody(meta.id, meta.model, meta.created, { tool_calls }, null)),
    );
  }
  const finish = calls.length > 0 ? "tool_calls" : "stop";
  await out.send(JSON.stringify(chunkBody(meta.id, meta.model, meta.created, {}, finish)));
  if (meta.includeUsage && done.kind === "reply") {
    // As OpenAI does with stream_options.include_usage: a last chunk with no choices.
    const chunk = { ...chunkBody(meta.id, meta.model, meta.created, {}, null), choices: [] };
    await out.send(JSON.stringify({ ...chunk, usage: usageBody(done.usage) }));
  }
  await out.send("[DONE]");
}

/**
 * Request header asking for the turn's tool calls in the stream: each as a chunk with no choices
 * (as OpenAI's usage chunk) and a `keel_tool` field `{id, name, arguments}`.
 */
export const TOOL_EVENTS_HEADER = "x-keel-tool-events";

export function toolChunk(meta: ResponseMeta, tool: ToolStarted) {
  return {
    ...chunkBody(meta.id, meta.model, meta.created, {}, null),
    choices: [],
    keel_tool: tool,
  };
}

/**
 * For `X-Keel-Tool-Events` clients (`keel chat`): the question just streamed waits for approval
 * `id`, as a chunk with no choices and a `keel_approval` field.
 */
export function approvalChunk(meta: ResponseMeta, id: string) {
  return {
    ...chunkBody(meta.id, meta.model, meta.created, {}, null),
    choices: [],
    keel_approval: { id },
  };
}

export function roleChunk(meta: ResponseMeta) {
  return chunkBody(meta.id, meta.model, meta.created, { role: "assistant", content: "" }, null);
}
