/**
 * Messages per second through the Discord adapter: the real gateway (in this process) with real
 * @discordjs/ws and @discordjs/rest against the stand-in Discord, and a model that answers "ok"
 * at once. As in the Telegram bench, each DM behaves like a user who sends the next message once
 * the previous one is answered; latency is message -> reply as the user sees it.
 */
import { performance } from "node:perf_hooks";
import { type FakeDiscord, startFakeDiscord } from "../test/fakes/discord-server.js";
import {
  allRepliesWithin,
  type MeasuredThroughput,
  type ThroughputOptions,
  type ThroughputResult,
  throughputFigures,
  withBenchGateway,
} from "./throughput.js";

const TOKEN = "discord-bench-token";

export async function runDiscordThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const discord = await startFakeDiscord({ token: TOKEN });
  const users = Array.from({ length: options.chats }, (_, i) => ({
    id: String(300_000_000_000_000_000n + BigInt(i)),
    username: `bench${i}`,
  }));
  return withBenchGateway(
    options,
    {
      env: {
        DISCORD_BOT_TOKEN: TOKEN,
        DISCORD_API_ROOT: discord.apiRoot,
        DISCORD_ALLOWED_USERS: users.map((u) => u.id).join(","),
      },
      close: () => discord.close(),
    },
    (messages, gatewayRssMb) => measure({ ...options, messages }, users, discord, gatewayRssMb),
  );
}

async function measure(
  options: ThroughputOptions,
  users: { id: string; username: string }[],
  discord: FakeDiscord,
  gatewayRssMb: () => number,
): Promise<MeasuredThroughput> {
  const perChat = Math.ceil(options.messages / users.length);
  const total = perChat * users.length;
  const channels = new Map(users.map((u) => [discord.dmChannel(u.id), u]));
  const sentAt = new Map<string, number>();
  const remaining = new Map(users.map((u) => [u.id, perChat]));
  const latencies: number[] = [];
  const rssBefore = gatewayRssMb();
  let answered = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const send = (channelId: string) => {
    const user = channels.get(channelId)!;
    const left = remaining.get(user.id) ?? 0;
    if (left <= 0) return;
    remaining.set(user.id, left - 1);
    const message = discord.userSends({ channelId, user, content: `message ${left}` });
    sentAt.set(message.id, performance.now());
  };
  const unsubscribe = discord.onBotMessage((message) => {
    const replyTo = message.message_reference?.message_id;
    const start = replyTo === undefined ? undefined : sentAt.get(replyTo);
    if (start === undefined || replyTo === undefined) return;
    sentAt.delete(replyTo);
    latencies.push(performance.now() - start);
    answered += 1;
    if (answered === total) finish();
    else setImmediate(() => send(message.channel_id));
  });
  const startedAt = performance.now();
  for (const channelId of channels.keys()) send(channelId);
  try {
    await allRepliesWithin(done, options.timeoutMs, () => ({ answered, total }));
  } finally {
    unsubscribe();
  }
  return throughputFigures({
    total,
    chats: users.length,
    startedAt,
    latencies,
    rssBefore,
    rssAfter: gatewayRssMb(),
  });
}
