/**
 * Long conversations: a real in-process gateway against the stand-in model with an 8k window.
 * - prompt size per turn over a long conversation with large tool outputs (must stay under the
 *   compaction threshold, 0.75 × 8,192 = 6,144 tokens, as the model itself counts them);
 * - compaction time (`/compact` on that conversation: the summary calls plus the record);
 * - the budget check each model call pays (ContextKeeper.prepare on a prompt that fits).
 */
import { performance } from "node:perf_hooks";
import { createLlmClient } from "../src/agent/llm-client.js";
import { createModelChain } from "../src/agent/model-chain.js";
import { createToolRegistry } from "../src/agent/tools/index.js";
import type { ChatMessage } from "../src/agent/types.js";
import { ContextKeeper } from "../src/context/context-keeper.js";
import { TokenGauge } from "../src/context/token-gauge.js";
import { createMemoryTool } from "../src/memory/memory-tool.js";
import { fakePromptTokens, startFakeOpenAI } from "../test/fakes/openai-server.js";
import { startInProcessGateway } from "../test/helpers/in-process-gateway.js";
import { createTempDir } from "../test/helpers/temp-home.js";
import { median, percentile } from "./stats.js";

export const CONTEXT_WINDOW = 8192;
export const THRESHOLD_TOKENS = Math.floor(CONTEXT_WINDOW * 0.75);

export interface ContextResult {
  turns: number;
  failedTurns: number;
  promptTokens: { p50: number; max: number };
  summaryCalls: number;
  compactMs: number;
  budgetCheckMs: { mean: number; p99: number };
}

const isSummary = (text: string) => /summari[sz]e/i.test(text);

export async function runContext(options: {
  turns: number;
  checks: number;
}): Promise<ContextResult> {
  const home = createTempDir("keel-bench-context-");
  const model = await startFakeOpenAI({ contextLength: CONTEXT_WINDOW });
  const gw = await startInProcessGateway({ home: home.path, modelBaseUrl: model.baseUrl });
  let failedTurns = 0;
  try {
    await ask("remember: codeword=heron");
    for (let i = 1; i < options.turns; i++) {
      const expected = i % 3 === 0 ? "big done" : `turn ${i}`;
      if ((await ask(i % 3 === 0 ? "big: 6000" : `echo: turn ${i}`)) !== expected) failedTurns++;
    }
    const sizes = model.requests
      .filter((r) => !isSummary(JSON.stringify(r.messages.at(-1))))
      .map(fakePromptTokens);
    const summaryCalls = model.requests.length - sizes.length;
    const started = performance.now();
    const compacted = await ask("/compact");
    const compactMs = performance.now() - started;
    if (!compacted.startsWith("Compacted")) throw new Error(`/compact answered: ${compacted}`);
    return {
      turns: options.turns,
      failedTurns,
      promptTokens: { p50: median(sizes), max: Math.max(...sizes) },
      summaryCalls,
      compactMs,
      budgetCheckMs: await budgetCheck(model.baseUrl, options.checks),
    };
  } finally {
    await gw.shutdown();
    await model.close();
    home.cleanup();
  }

  async function ask(text: string): Promise<string> {
    const before = gw.platform.texts("1").length;
    await gw.send(text);
    for (let i = 0; i < 6000 && gw.platform.texts("1").length === before; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    return gw.platform.texts("1").at(-1) ?? "";
  }
}

/** ContextKeeper.prepare on a 32k-window prompt of 200 messages filled to about 60 %: no compaction. */
async function budgetCheck(
  baseUrl: string,
  checks: number,
): Promise<{ mean: number; p99: number }> {
  const chain = createModelChain({
    models: [{ name: "m", client: createLlmClient({ baseUrl, model: "m", timeoutMs: 10_000 }) }],
    maxRetries: 0,
  });
  const keeper = new ContextKeeper({
    complete: (request) => chain.complete(request),
    model: "m",
    windowTokens: 32_768,
    threshold: 0.75,
    gauge: new TokenGauge(),
    summary: "An earlier summary.",
    sink: { record: async () => false },
  });
  const tools = createToolRegistry([createMemoryTool("/nonexistent")]).specs();
  const messages: ChatMessage[] = [];
  for (let i = 0; i < 50; i++) {
    const id = `c${i}`;
    messages.push(
      { role: "user", content: `question ${i} `.repeat(20) },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: "terminal", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: id, content: "x".repeat(1_200) },
      { role: "assistant", content: `answer ${i} `.repeat(10) },
    );
  }
  const times: number[] = [];
  const signal = new AbortController().signal;
  for (let i = 0; i < checks; i++) {
    // A new message each call, as in a turn: the rest is measured once and remembered.
    messages.push({ role: "user", content: `next ${i}` });
    const started = performance.now();
    const prepared = await keeper.prepare("You are Keel.", messages, tools, signal);
    times.push(performance.now() - started);
    messages.pop();
    if (!prepared.ok || prepared.dropped > 0) throw new Error("the budget check compacted");
  }
  const sorted = [...times].sort((a, b) => a - b);
  return { mean: times.reduce((a, b) => a + b, 0) / times.length, p99: percentile(sorted, 99) };
}
