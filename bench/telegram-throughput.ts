/**
 * Messages per second through Telegram long polling: the real gateway (in this process) with
 * real grammY against the stand-in Bot API server, and a model that answers "ok" at once.
 * Each chat behaves like a user who sends the next message once the previous one is answered,
 * so every session has one turn at a time (no busy-input effects) and the measured latency is
 * message -> reply as the user sees it.
 */
import { performance } from "node:perf_hooks";
import { type SentCall, startFakeTelegram } from "../test/fakes/telegram-server.js";
import {
  allRepliesWithin,
  type MeasuredThroughput,
  type ThroughputOptions,
  type ThroughputResult,
  throughputFigures,
  withBenchGateway,
} from "./throughput.js";

export type { ThroughputOptions, ThroughputResult };

const TOKEN = "123456:BENCH";

/** Runs one measurement and tears everything down. */
export async function runTelegramThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const telegram = await startFakeTelegram({ token: TOKEN });
  const chatIds = Array.from({ length: options.chats }, (_, i) => 5_000_000 + i);
  return withBenchGateway(
    options,
    {
      env: {
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: telegram.apiRoot,
        TELEGRAM_ALLOWED_USERS: chatIds.join(","),
      },
      close: () => telegram.close(),
    },
    (messages, gatewayRssMb) => measure({ ...options, messages }, chatIds, telegram, gatewayRssMb),
  );
}

async function measure(
  options: ThroughputOptions,
  chatIds: number[],
  telegram: Awaited<ReturnType<typeof startFakeTelegram>>,
  gatewayRssMb: () => number,
): Promise<MeasuredThroughput> {
  const perChat = Math.ceil(options.messages / chatIds.length);
  const total = perChat * chatIds.length;
  const sentAt = new Map<string, number>();
  const remaining = new Map(chatIds.map((id) => [String(id), perChat]));
  const latencies: number[] = [];
  const rssBefore = gatewayRssMb();
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
  try {
    await allRepliesWithin(done, options.timeoutMs, () => ({ answered, total }));
  } finally {
    unsubscribe();
  }
  return throughputFigures({
    total,
    chats: chatIds.length,
    startedAt,
    latencies,
    rssBefore,
    rssAfter: gatewayRssMb(),
  });
}
