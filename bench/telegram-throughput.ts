/**
 * Messages per second through Telegram long polling: the real gateway (in this process) with
 * real grammY against the stand-in Bot API server, and a model that answers "ok" at once.
 * Each chat behaves like a user who sends the next message once the previous one is answered,
 * so every session has one turn at a time (no busy-input effects) and the measured latency is
 * message -> reply as the user sees it.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { loadConfig } from "../src/config/load-config.js";
import { startFakeOpenAI } from "../test/fakes/openai-server.js";
import { type SentCall, startFakeTelegram } from "../test/fakes/telegram-server.js";
import { createTestGateway, stopTestGateway } from "../test/helpers/in-process-gateway.js";

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

const TOKEN = "123456:BENCH";

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

const mb = (bytes: number) => Math.round(bytes / 1024 / 1024);

/** Runs one measurement and tears everything down. */
export async function runTelegramThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const home = mkdtempSync(join(tmpdir(), "keel-bench-"));
  if (options.maxConcurrentTurns !== undefined) {
    writeFileSync(
      join(home, "config.yaml"),
      `agent:\n  max_concurrent_turns: ${options.maxConcurrentTurns}\n`,
    );
  }
  const telegram = await startFakeTelegram({ token: TOKEN });
  const model = await startFakeOpenAI();
  model.script({ text: "ok" });
  const chatIds = Array.from({ length: options.chats }, (_, i) => 5_000_000 + i);
  const { config } = loadConfig({
    home,
    env: {
      TELEGRAM_BOT_TOKEN: TOKEN,
      TELEGRAM_API_ROOT: telegram.apiRoot,
      TELEGRAM_ALLOWED_USERS: chatIds.join(","),
      OPENAI_BASE_URL: model.baseUrl,
      KEEL_MODEL: "bench-model",
      KEEL_HTTP_PORT: "0",
    },
  });
  const gateway = createTestGateway(config, { version: "bench" });
  try {
    await gateway.start();
    const result = await measure(options, chatIds, telegram);
    return { ...result, maxConcurrentTurns: config.agent.max_concurrent_turns };
  } finally {
    await stopTestGateway(gateway);
    await telegram.close();
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
}

async function measure(
  options: ThroughputOptions,
  chatIds: number[],
  telegram: Awaited<ReturnType<typeof startFakeTelegram>>,
): Promise<Omit<ThroughputResult, "maxConcurrentTurns">> {
  const perChat = Math.ceil(options.messages / chatIds.length);
  const total = perChat * chatIds.length;
  const sentAt = new Map<string, number>();
  const remaining = new Map(chatIds.map((id) => [String(id), perChat]));
  const latencies: number[] = [];
  const rssBefore = process.memoryUsage().rss;
  let answered = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const send = (chatId: string) => {
    const left = remaining.get(chatId) ?? 0;
    if (left <= 0) return;
    remaining.set(chatId, left - 1);
    const { message_id } = telegram.sendUserMessage({ chatId, text: `message ${left}` });
    sentAt.set(`${chatId}:${message_id}`, performance.now());
  };
  const unsubscribe = telegram.onCall((call: SentCall) => {
    if (call.method !== "sendMessage" || !call.ok) return;
    const chatId = String(call.payload.chat_id);
    const replyTo = (call.payload.reply_parameters as { message_id?: number } | undefined)
      ?.message_id;
    const key = `${chatId}:${replyTo}`;
    const start = sentAt.get(key);
    if (start === undefined) return;
    sentAt.delete(key);
    latencies.push(performance.now() - start);
    answered += 1;
    if (answered === total) finish();
    else send(chatId);
  });
  const startedAt = performance.now();
  for (const chatId of chatIds) send(String(chatId));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(new Error(`only ${answered} of ${total} replies within ${options.timeoutMs} ms`)),
      options.timeoutMs,
    );
  });
  try {
    await Promise.race([done, timeout]);
  } finally {
    clearTimeout(timer);
    unsubscribe();
  }
  const seconds = (performance.now() - startedAt) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    messages: total,
    chats: chatIds.length,
    seconds,
    messagesPerSecond: total / seconds,
    latencyMs: {
      p50: percentile(latencies, 50),
      p90: percentile(latencies, 90),
      p99: percentile(latencies, 99),
      max: latencies[latencies.length - 1] ?? Number.NaN,
    },
    rssMb: { before: mb(rssBefore), after: mb(process.memoryUsage().rss) },
  };
}
