/**
 * Prompt size in tokens without a tokenizer: a quarter of the characters of the request as JSON,
 * corrected by what the model itself reported for the previous call (its `usage.prompt_tokens`).
 * Local models use their own tokenizers, so the model's count is the truth and chars/4 only
 * fills the gap until the next call reports.
 */
import type { ChatMessage, ToolSpec } from "../agent/types.js";

/**
 * Characters per message and per tool spec, computed once per object (the budget check runs every
 * call; the tool registry keeps one spec object per tool).
 */
const sizes = new WeakMap<object, number>();

function charsOf(value: object): number {
  let size = sizes.get(value);
  if (size === undefined) {
    size = JSON.stringify(value).length;
    sizes.set(value, size);
  }
  return size;
}

/** The uncorrected estimate: characters / 4 of the messages and the tool schemas. */
export function rawTokens(messages: readonly ChatMessage[], tools: readonly ToolSpec[]): number {
  let chars = 2;
  for (const m of messages) chars += charsOf(m) + 1;
  // As JSON.stringify(tools).length: brackets, each spec, the commas between.
  if (tools.length > 0) {
    chars += 1;
    for (const tool of tools) chars += charsOf(tool) + 1;
  }
  return Math.ceil(chars / 4);
}

/** Tokens of a piece of text, uncorrected. */
export function textTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Keeps the ratio between the model's own counts and {@link rawTokens}. */
export class TokenGauge {
  private ratio = 1;

  /** The estimate for a prompt, corrected by the last observed ratio. */
  estimate(messages: readonly ChatMessage[], tools: readonly ToolSpec[]): number {
    return this.corrected(rawTokens(messages, tools));
  }

  /** An uncorrected count ({@link rawTokens}) corrected by the last observed ratio. */
  corrected(raw: number): number {
    return Math.ceil(raw * this.ratio);
  }

  /** Learns from a call the model counted. The ratio is bounded so one odd answer cannot swing it far. */
  observe(raw: number, reportedPromptTokens: number): void {
    if (raw <= 0 || reportedPromptTokens <= 0) return;
    this.ratio = Math.min(3, Math.max(0.5, reportedPromptTokens / raw));
  }

  /** The model refused a prompt the estimate thought would fit: count more pessimistically. */
  inflate(): void {
    this.ratio = Math.min(3, this.ratio * 1.25);
  }

  get correction(): number {
    return this.ratio;
  }
}
