/**
 * What the platform throughput benches (Telegram, Slack, Discord, email, WhatsApp, Matrix) share:
 * the options and figures, the gateway child, waiting for every reply within a bound, turning the
 * latencies into the figures, and (WhatsApp, Matrix) the users' closed loop.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { loadConfig } from "../src/config/load-config.js";
import { startFakeOpenAI } from "../test/fakes/openai-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { GatewayChild } from "./gateway-child.js";
import { percentile } from "./stats.js";

export interface ThroughputOptions {
  /** Messages in total, spread evenly over the chats. */
  messages: number;
  /**
   * Messages sent first the same way, untimed: a fresh gateway runs its first ~1,500 at about
   * half its steady rate (JIT tiers, heap growth), which a 2,000-message run mostly measured.
   */
  warmup: number;
  chats: number;
  /** Give up after this long. */
  timeoutMs: number;
  /** `agent.max_concurrent_turns`; the config default when omitted. */
  maxConcurrentTurns?: number;
  /** Node/V8 flags for the gateway child (`--gateway-node-args`, e.g. `--cpu-prof`). */
  nodeArgs?: string[];
}

export interface ThroughputResult {
  messages: number;
  chats: number;
  seconds: number;
  messagesPerSecond: number;
  maxConcurrentTurns: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** The gateway's, before the first message and after the last reply. */
  rssMb: { before: number; after: number };
  /**
   * The gateway's CPU time (user + system) from the first message to the last reply, per
   * message: steadier than messages/s on a shared machine, where the gateway's core is the limit.
   */
  cpuMsPerMessage: number;
  /** The rate of the untimed warm-up messages (null without a warm-up). */
  warmupMessagesPerSecond: number | null;
}

/** What a platform's `measure` finds; the runner adds the gateway's setting and CPU time. */
export type MeasuredThroughput = Omit<
  ThroughputResult,
  "maxConcurrentTurns" | "cpuMsPerMessage" | "warmupMessagesPerSecond"
>;

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
  /** The gateway's RSS (MB) before the first message, and a reading of it now. */
  rssBefore: number;
  rssAfter: number;
}): MeasuredThroughput {
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
    rssMb: { before: Math.round(run.rssBefore), after: Math.round(run.rssAfter) },
  };
}

/**
 * Runs `measure` against the BUILT gateway in a child process (as users run it, and as the API
 * bench runs it: the stand-in platform and model in this process do not share its core), in a
 * temporary home wired by `platformEnv` to a started stand-in platform and to an instant stand-in
 * model; tears everything down after. The RSS figures are the gateway's.
 */
export async function withBenchGateway(
  options: ThroughputOptions,
  /** `port`: where the gateway listens, when the stand-in calls it (a webhook). */
  platform: { env: Record<string, string>; port?: number; close(): Promise<void> },
  measure: (messages: number, gatewayRssMb: () => number) => Promise<MeasuredThroughput>,
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
  const env = { ...platform.env, OPENAI_BASE_URL: model.baseUrl, KEEL_MODEL: "bench-model" };
  // Read here only to report the setting the gateway runs with.
  const { config } = loadConfig({ home, env });
  const gateway = GatewayChild.spawn({
    home,
    port: platform.port ?? (await freePort()),
    env,
    outputFile: join(home, "gateway.log"),
    nodeArgs: options.nodeArgs,
  });
  try {
    await gateway.waitReady();
    const rss = () => gateway.rssMb();
    const warm = options.warmup > 0 ? await measure(options.warmup, rss) : null;
    const cpuBefore = gateway.cpuMs();
    const result = await measure(options.messages, rss);
    return {
      ...result,
      cpuMsPerMessage: (gateway.cpuMs() - cpuBefore) / result.messages,
      maxConcurrentTurns: config.agent.max_concurrent_turns,
      warmupMessagesPerSecond: warm?.messagesPerSecond ?? null,
    };
  } finally {
    await gateway.stop();
    await platform.close();
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The users of a platform bench: each of `chats` writes, and writes again once the stand-in saw
 * the reply, so every session runs one turn at a time and a latency is message -> reply as the
 * user sees it. `write` sends a chat's next message; `onReply` calls back with the chat a reply
 * went to (the platform's own reading of its stand-in's calls).
 */
export async function closedLoop(run: {
  messages: number;
  timeoutMs: number;
  chats: string[];
  write(chat: string, text: string): unknown;
  onReply(listener: (chat: string) => void): () => void;
  gatewayRssMb: () => number;
}): Promise<MeasuredThroughput> {
  const perChat = Math.ceil(run.messages / run.chats.length);
  const total = perChat * run.chats.length;
  const sentAt = new Map<string, number>();
  const remaining = new Map(run.chats.map((chat) => [chat, perChat]));
  const latencies: number[] = [];
  const rssBefore = run.gatewayRssMb();
  let answered = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const send = (chat: string) => {
    const left = remaining.get(chat) ?? 0;
    if (left <= 0) return;
    remaining.set(chat, left - 1);
    sentAt.set(chat, performance.now());
    run.write(chat, `message ${left}`);
  };
  const unsubscribe = run.onReply((chat) => {
    const start = sentAt.get(chat);
    if (start === undefined) return;
    sentAt.delete(chat);
    latencies.push(performance.now() - start);
    answered += 1;
    if (answered === total) finish();
    else send(chat);
  });
  const startedAt = performance.now();
  for (const chat of run.chats) send(chat);
  try {
    await allRepliesWithin(done, run.timeoutMs, () => ({ answered, total }));
  } finally {
    unsubscribe();
  }
  return throughputFigures({
    total,
    chats: run.chats.length,
    startedAt,
    latencies,
    rssBefore,
    rssAfter: run.gatewayRssMb(),
  });
}
