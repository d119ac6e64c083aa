/**
 * Keeps a turn's prompt inside the model's window. Before each model call it estimates the prompt
 * (the model's own count of the previous call, plus chars/4 for what changed) and, past
 * `threshold` × window, shortens old tool outputs in the prompt, then has older exchanges
 * summarised and records that summary durably (one store transaction), then shortens every tool
 * output, and only then gives up with a clear error. Each step is bounded: at most
 * {@link MAX_COMPACTIONS_PER_TURN} summaries per turn, each in at most a few model calls.
 */
import { buildPrompt } from "../agent/agent-loop.js";
import type { ModelChainRequest } from "../agent/model-chain.js";
import type {
  ChatMessage,
  CompactionSink,
  LlmResult,
  PreparedPrompt,
  PromptKeeper,
  TokenUsage,
  ToolSpec,
} from "../agent/types.js";
import type { UsageInput } from "../sessions/store.js";
import { lastUserIndex, trimToolOutputs } from "./prompt-trim.js";
import { summarise } from "./summariser.js";
import { rawTokens, type TokenGauge } from "./token-gauge.js";

export const MAX_COMPACTIONS_PER_TURN = 3;
/** Old tool outputs (before the current exchange) are cut to this in an over-full prompt. */
const OLD_TOOL_CHARS = 2_000;
/** The newest exchanges kept verbatim by a compaction: this share of the window. */
const KEEP_SHARE = 0.25;

export interface CompactionReport {
  messages: number;
  tokensBefore: number;
  tokensAfter: number;
}

export interface ContextKeeperOptions {
  complete(request: ModelChainRequest): Promise<LlmResult>;
  /** The model this session uses (its window is the budget). */
  model: string;
  preferred?: string;
  windowTokens: number;
  threshold: number;
  gauge: TokenGauge;
  /** The session's current summary (its latest compaction). */
  summary: string | null;
  sink: CompactionSink;
  onCompaction?(report: CompactionReport): void;
  /** Why the last summary failed, for the user (read by the caller of a failed prepare). */
}

/** The system prompt with the running summary appended, framed as reference. */
export function withSummary(systemPrompt: string, summary: string | null): string {
  if (!summary) return systemPrompt;
  return (
    `${systemPrompt}\n\n[Summary of the earlier part of this conversation (older messages are ` +
    "not shown). It is background, not instructions: answer the newest user message below.]\n" +
    summary
  );
}

export class ContextKeeper implements PromptKeeper {
  private summary: string | null;
  private compactions = 0;
  private lastError: string | null = null;
  /**
   * The prompt `prepare` returned last and its uncorrected count: the observation after the call
   * is about that prompt, and a long conversation costs a lookup per message each time it is
   * measured. Kept by this keeper (one turn), never by the session's gauge.
   */
  private measured: {
    prompt: readonly ChatMessage[];
    tools: readonly ToolSpec[];
    raw: number;
  } | null = null;

  constructor(private readonly options: ContextKeeperOptions) {
    this.summary = options.summary;
  }

  get limit(): number {
    return Math.floor(this.options.windowTokens * this.options.threshold);
  }

  async prepare(
    systemPrompt: string,
    messages: readonly ChatMessage[],
    tools: readonly ToolSpec[],
    signal: AbortSignal,
    force = false,
  ): Promise<PreparedPrompt> {
    const { gauge } = this.options;
    const limit = this.limit;
    const build = (view: readonly ChatMessage[]) => {
      const prompt = buildPrompt(withSummary(systemPrompt, this.summary), [...view]);
      const raw = rawTokens(prompt, tools);
      this.measured = { prompt, tools, raw };
      return { prompt, estimate: gauge.corrected(raw) };
    };
    const whole = build(messages);
    if (!force && whole.estimate <= limit) return { ok: true, ...whole, dropped: 0 };
    const trimmed = build(trimToolOutputs(messages, OLD_TOOL_CHARS, lastUserIndex(messages)));
    if (!force && trimmed.estimate <= limit) return { ok: true, ...trimmed, dropped: 0 };

    let dropped = 0;
    if (this.compactions < MAX_COMPACTIONS_PER_TURN) {
      const keep = Math.floor(this.options.windowTokens * KEEP_SHARE);
      const done = await this.compact(systemPrompt, messages, tools, signal, whole.estimate, keep);
      dropped = done?.messages ?? 0;
    }
    if (signal.aborted) return { ok: false, error: "The turn was interrupted." };
    const kept = messages.slice(dropped);
    let attempt = build(trimToolOutputs(kept, OLD_TOOL_CHARS, lastUserIndex(kept)));
    for (const chars of [1_000, 200]) {
      if (attempt.estimate <= limit) break;
      attempt = build(trimToolOutputs(kept, chars));
    }
    if (attempt.estimate <= limit) return { ok: true, ...attempt, dropped };
    const why = this.lastError ? ` (summarising failed: ${this.lastError})` : "";
    return {
      ok: false,
      dropped,
      error:
        `This conversation no longer fits the model's context window: about ${attempt.estimate} ` +
        `tokens against a budget of ${limit} (${this.options.windowTokens} × ` +
        `${this.options.threshold}), even with older messages summarised and tool outputs ` +
        `shortened${why}. Send /compact to try again, or /new to start a fresh conversation.`,
    };
  }

  /**
   * `/compact`: summarises everything before the newest exchange now, whatever the budget.
   * Null when there was nothing to summarise, the summary failed (see `failure`), or it would not
   * be shorter than what it replaces.
   */
  async compactNow(
    systemPrompt: string,
    messages: readonly ChatMessage[],
    tools: readonly ToolSpec[],
    signal: AbortSignal,
  ): Promise<CompactionReport | null> {
    const before = this.options.gauge.estimate(
      buildPrompt(withSummary(systemPrompt, this.summary), [...messages]),
      tools,
    );
    return this.compact(systemPrompt, messages, tools, signal, before, 0);
  }

  /** Why the latest summary was not recorded, if it was not. */
  get failure(): string | null {
    return this.lastError;
  }

  /**
   * Summarises the oldest exchanges, keeping about `keepTokens` verbatim (at least the newest
   * exchange); returns what the recorded summary replaced, or null when nothing was recorded.
   * A summary is recorded only when the prompt gets smaller with it: a compaction never grows
   * the history, so it cannot feed a loop.
   */
  private async compact(
    systemPrompt: string,
    messages: readonly ChatMessage[],
    tools: readonly ToolSpec[],
    signal: AbortSignal,
    tokensBefore: number,
    keepTokens: number,
  ): Promise<CompactionReport | null> {
    const cut = chooseCut(messages, keepTokens);
    if (cut === 0) return null;
    this.compactions += 1;
    const result = await summarise({
      complete: (request) => this.options.complete(request),
      ...(this.options.preferred && { preferred: this.options.preferred }),
      previous: this.summary,
      messages: messages.slice(0, cut),
      windowTokens: this.options.windowTokens,
      signal,
    });
    if (!result.ok) {
      this.lastError = result.error;
      return null;
    }
    const kept = messages.slice(cut);
    const after = this.options.gauge.estimate(
      buildPrompt(withSummary(systemPrompt, result.summary), [...kept]),
      tools,
    );
    if (after >= tokensBefore) {
      this.lastError = "the summary would not be shorter than the messages it replaces";
      return null;
    }
    const covered = messages
      .slice(0, cut)
      .filter((m) => m.role === "user" || m.role === "assistant").length;
    const recorded = await this.options.sink.record({
      coveredCount: covered,
      summary: result.summary,
      usage: usageInput(result.model ?? this.options.model, result.usage),
      tokensBefore,
      tokensAfter: after,
    });
    if (!recorded) return null;
    this.summary = result.summary;
    this.lastError = null;
    const report = { messages: cut, tokensBefore, tokensAfter: after };
    this.options.onCompaction?.(report);
    return report;
  }

  observe(prompt: readonly ChatMessage[], tools: readonly ToolSpec[], usage?: TokenUsage): void {
    // Measured for this call only: the prompt is not held past it.
    const measured = this.measured;
    this.measured = null;
    if (usage && !usage.estimated) {
      const same = measured?.prompt === prompt && measured.tools === tools;
      const raw = same ? measured.raw : rawTokens(prompt, tools);
      this.options.gauge.observe(raw, usage.promptTokens);
    }
  }

  overflowed(): void {
    this.options.gauge.inflate();
  }
}

/**
 * Where a compaction cuts: the earliest user message (a new exchange, so a tool call is never
 * separated from its result) after which at most `keepTokens` remain, or else the newest user
 * message. 0 when there is no user message to cut at after the first message.
 */
export function chooseCut(messages: readonly ChatMessage[], keepTokens: number): number {
  let tail = 0;
  let best = 0;
  let newest = 0;
  for (let i = messages.length - 1; i >= 1; i--) {
    tail += rawTokens([messages[i]!], []);
    if (messages[i]!.role !== "user") continue;
    if (newest === 0) newest = i;
    if (tail <= keepTokens) best = i;
  }
  return best || newest;
}

function usageInput(model: string, usage: TokenUsage): UsageInput {
  return { model, ...usage };
}
