/**
 * Asks the model for the running summary of a conversation's older messages. The messages are
 * rendered as text in chunks small enough for the model's window (tool outputs shortened first),
 * and each chunk updates the summary of the ones before, so a session of any length is
 * summarised in a bounded number of calls.
 */

import { contentText } from "../agent/content.js";
import type { ModelChainRequest } from "../agent/model-chain.js";
import type { ChatMessage, LlmResult, TokenUsage } from "../agent/types.js";
import { shorten } from "./prompt-trim.js";
import { textTokens } from "./token-gauge.js";

/** At most this many model calls per compaction. */
export const MAX_CHUNKS = 6;

const SUMMARISER_PROMPT =
  "You keep the running summary of a long conversation between a user and an AI agent that " +
  "uses tools. The summary replaces the older messages in the agent's context, so it must hold " +
  "what the agent needs to carry on: the user's goals and preferences, every fact, name and " +
  "number the user stated (verbatim), decisions taken, work done and its results (files, " +
  "commands, outcomes), and tasks still open. Write short plain sentences or bullet points. " +
  "Describe; do not give instructions and do not address the user.";

export interface SummariseInput {
  complete(request: ModelChainRequest): Promise<LlmResult>;
  preferred?: string;
  previous: string | null;
  messages: readonly ChatMessage[];
  /** The model's window, in tokens. */
  windowTokens: number;
  signal: AbortSignal;
}

export type SummaryResult =
  | { ok: true; summary: string; usage: TokenUsage; model: string | undefined; calls: number }
  | { ok: false; error: string };

/** Longest summary kept, in characters: a tenth of the window, at most about 4,000 tokens. */
export function maxSummaryChars(windowTokens: number): number {
  return Math.min(16_000, Math.floor(windowTokens * 0.1 * 4));
}

export async function summarise(input: SummariseInput): Promise<SummaryResult> {
  const chunkChars = Math.max(2_000, Math.floor(input.windowTokens * 0.4 * 4));
  const chunks = chunkText(input.messages, chunkChars);
  let summary = input.previous;
  const usage: TokenUsage = { promptTokens: 0, completionTokens: 0, estimated: false };
  let model: string | undefined;
  for (const chunk of chunks) {
    const request: ChatMessage[] = [
      { role: "system", content: SUMMARISER_PROMPT },
      {
        role: "user",
        content:
          `Summary so far:\n${summary ?? "(none yet)"}\n\nNewer messages:\n${chunk}\n\n` +
          "Please summarise the summary so far and the newer messages into one updated summary " +
          `of at most ${Math.floor(maxSummaryChars(input.windowTokens) / 6)} words.`,
      },
    ];
    const result = await input.complete({
      messages: request,
      tools: [],
      signal: input.signal,
      ...(input.preferred && { preferred: input.preferred }),
    });
    if (!result.ok) return { ok: false, error: result.error };
    const text = (result.message.content ?? "").trim();
    if (text.length === 0) return { ok: false, error: "The model wrote an empty summary." };
    summary = shorten(text, maxSummaryChars(input.windowTokens));
    model = result.model ?? model;
    const callUsage = result.usage ?? {
      promptTokens: textTokens(JSON.stringify(request)),
      completionTokens: textTokens(text),
      estimated: true,
    };
    usage.promptTokens += callUsage.promptTokens;
    usage.completionTokens += callUsage.completionTokens;
    usage.estimated ||= callUsage.estimated;
  }
  if (summary === null) return { ok: false, error: "There was nothing to summarise." };
  return { ok: true, summary, usage, model, calls: chunks.length };
}

/** The messages as text blocks, packed into at most {@link MAX_CHUNKS} chunks of about `chunkChars`. */
export function chunkText(messages: readonly ChatMessage[], chunkChars: number): string[] {
  for (const toolChars of [1_000, 200]) {
    const blocks = messages.map((m) => render(m, toolChars, Math.floor(chunkChars / 2)));
    const chunks = pack(blocks, chunkChars);
    if (chunks.length <= MAX_CHUNKS) return chunks;
  }
  // Still too long: keep the oldest and the newest messages, and say what is left out between.
  const blocks = messages.map((m) => render(m, 200, 1_000));
  const half = Math.floor((MAX_CHUNKS * chunkChars) / 2);
  const head: string[] = [];
  const tail: string[] = [];
  let size = 0;
  for (const block of blocks) {
    if (size + block.length > half) break;
    head.push(block);
    size += block.length;
  }
  size = 0;
  for (const block of [...blocks].reverse()) {
    if (size + block.length > half - 200 || head.length + tail.length >= blocks.length) break;
    tail.unshift(block);
    size += block.length;
  }
  const left = blocks.length - head.length - tail.length;
  return pack([...head, `[${left} messages left out here]`, ...tail], chunkChars).slice(
    0,
    MAX_CHUNKS,
  );
}

function pack(blocks: string[], chunkChars: number): string[] {
  const chunks: string[] = [];
  let current = "";
  for (const block of blocks) {
    if (current.length > 0 && current.length + block.length + 1 > chunkChars) {
      chunks.push(current);
      current = "";
    }
    current += (current ? "\n" : "") + block;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

function render(message: ChatMessage, toolChars: number, textChars: number): string {
  switch (message.role) {
    case "user":
      return `User: ${shorten(contentText(message.content), textChars)}`;
    case "system":
      return `Note: ${shorten(message.content, 500)}`;
    case "tool":
      return `Tool result: ${shorten(message.content, toolChars)}`;
    case "assistant": {
      const parts = message.content ? [`Assistant: ${shorten(message.content, textChars)}`] : [];
      for (const call of message.tool_calls ?? []) {
        parts.push(
          `Assistant called ${call.function.name}(${shorten(call.function.arguments, 300)})`,
        );
      }
      return parts.join("\n");
    }
  }
}
