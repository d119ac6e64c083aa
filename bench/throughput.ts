/**
 * What the platform throughput benches (Telegram, Slack, Discord) share: the options and figures,
 * waiting for every reply within a bound, and turning the latencies into the figures.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { loadConfig } from "../src/config/load-config.js";
import { startFakeOpenAI } from "../test/fakes/openai-server.js";
import { createTestGateway, stopTestGateway } from "../test/helpers/in-process-gateway.js";
import { percentile } from "./stats.js";

export interface ThroughputOptions {
  /** Messages in total, spread evenly over the chats. */
  messages: number;
  chats: number;
  /** Give up after this long. */
  timeoutMs: number;
  /** `agent.max_concurrent_turns`; the config default when omitted. */
  maxConcurrentTurns?: number;
}

export interface ThroughputResult {
  messages: number;
  chats: number;
  seconds: number;
  messagesPerSecond: number;
  maxConcurrentTurns: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  rssMb: { before: number; after: number };
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);

/** Resolves with `done`, or rejects after `timeoutMs` saying how many replies came. */
export async function allRepliesWithin(
  done: Promise<void>,
  timeoutMs: number,
  progress: () => { answered: number; total: number },
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const { answered, total } = progress();
      reject(new Error(`only ${answered} of ${total} replies within ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    await Promise.race([done, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The figures of a run that sent `total` messages over `chats` chats from `startedAt` on. */
export function throughputFigures(run: {
  total: number;
  chats: number;
  startedAt: number;
  latencies: number[];
  rssBefore: number;
}): Omit<ThroughputResult, "maxConcurrentTurns"> {
  const seconds = (performance.now() - run.startedAt) / 1000;
  const latencies = [...run.latencies].sort((a, b) => a - b);
  return {
    messages: run.total,
    chats: run.chats,
    seconds,
    messagesPerSecond: run.total / seconds,
    latencyMs: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      max: latencies.at(-1) ?? Number.NaN,
    },
    rssMb: { before: mb(run.rssBefore), after: mb(process.memoryUsage().rss) },
  };
}

/**
 * Runs `measure` against an in-process gateway in a temporary home, wired by `platformEnv` to a
 * started stand-in platform and to an instant stand-in model; tears everything down after.
 */
export async function withBenchGateway(
  options: ThroughputOptions,
  platform: { env: Record<string, string>; close(): Promise<void> },
  measure: () => Promise<Omit<ThroughputResult, "maxConcurrentTurns">>,
): Promise<ThroughputResult> {
  const home = mkdtempSync(join(tmpdir(), "keel-bench-"));
  if (options.maxConcurrentTurns !== undefined) {
    writeFileSync(
      join(home, "config.yaml"),
      `agent:\n  max_concurrent_turns: ${options.maxConcurrentTurns}\n`,
    );
  }
  const model = await startFakeOpenAI();
  model.script({ text: "ok" });
  const { config } = loadConfig({
    home,
    env: {
      ...platform.env,
      OPENAI_BASE_URL: model.baseUrl,
      KEEL_MODEL: "bench-model",
      KEEL_HTTP_PORT: "0",
    },
  });
  const gateway = createTestGateway(config);
  try {
    await gateway.start();
    const result = await measure();
    return { ...result, maxConcurrentTurns: config.agent.max_concurrent_turns };
  } finally {
    await stopTestGateway(gateway);
    await platform.close();
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
}
