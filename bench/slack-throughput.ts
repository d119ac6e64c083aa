/**
 * Messages per second through Slack Socket Mode: the real gateway (in this process) with the real
 * `@slack/socket-mode` and `@slack/web-api` against the stand-in Slack, and a model that answers
 * "ok" at once. Each DM behaves like a user who writes again once the previous message is
 * answered, so the latency is message -> reply as the user sees it (including the envelope ack
 * after the inbox commit, and the metadata-marked `chat.postMessage`).
 */
import { performance } from "node:perf_hooks";
import { type FakeSlack, startFakeSlack } from "../test/fakes/slack-server.js";
import {
  allRepliesWithin,
  type MeasuredThroughput,
  type ThroughputOptions,
  type ThroughputResult,
  throughputFigures,
  withBenchGateway,
} from "./throughput.js";

/** Runs one measurement and tears everything down. */
export async function runSlackThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const slack = await startFakeSlack();
  const users = Array.from({ length: options.chats }, (_, i) => `UBENCH${i}`);
  return withBenchGateway(
    options,
    {
      env: {
        SLACK_APP_TOKEN: slack.appToken,
        SLACK_BOT_TOKEN: slack.botToken,
        SLACK_API_ROOT: slack.apiRoot,
        SLACK_ALLOWED_USERS: users.join(","),
      },
      close: () => slack.close(),
    },
    (messages, gatewayRssMb) => measure({ ...options, messages }, users, slack, gatewayRssMb),
  );
}

async function measure(
  options: ThroughputOptions,
  users: string[],
  slack: FakeSlack,
  gatewayRssMb: () => number,
): Promise<MeasuredThroughput> {
  const perChat = Math.ceil(options.messages / users.length);
  const total = perChat * users.length;
  const channelOf = (i: number) => `DBENCH${i}`;
  const sentAt = new Map<string, number>();
  const remaining = new Map(users.map((_, i) => [channelOf(i), perChat]));
  const userOf = new Map(users.map((user, i) => [channelOf(i), user]));
  const latencies: number[] = [];
  const rssBefore = gatewayRssMb();
  let answered = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const send = (channel: string) => {
    const left = remaining.get(channel) ?? 0;
    if (left <= 0) return;
    remaining.set(channel, left - 1);
    slack.userPosts({ channel, user: userOf.get(channel)!, text: `message ${left}` });
    sentAt.set(channel, performance.now());
  };
  const unsubscribe = slack.onCall((call) => {
    if (call.method !== "chat.postMessage" || call.outcome !== "ok") return;
    const channel = String(call.args.channel);
    const start = sentAt.get(channel);
    if (start === undefined) return;
    sentAt.delete(channel);
    latencies.push(performance.now() - start);
    answered += 1;
    if (answered === total) finish();
    else send(channel);
  });
  const startedAt = performance.now();
  for (let i = 0; i < users.length; i++) send(channelOf(i));
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
