/**
 * `npm run bench`: Keel's benchmarks. Options: `--messages N` (default 2000), `--chats N`
 * (default 50), `--concurrency N` (agent.max_concurrent_turns, default: the config default),
 * `--timeout SECONDS` (default 120), `--json` for machine-readable output.
 */
import { parseArgs } from "node:util";
import { runTelegramThroughput, type ThroughputResult } from "./telegram-throughput.js";

const TARGET_MESSAGES_PER_SECOND = 300;

function report(result: ThroughputResult): string {
  const { latencyMs: l, rssMb } = result;
  const verdict =
    result.messagesPerSecond >= TARGET_MESSAGES_PER_SECOND
      ? `above the ${TARGET_MESSAGES_PER_SECOND}/s target`
      : `BELOW the ${TARGET_MESSAGES_PER_SECOND}/s target`;
  return [
    "Telegram polling throughput (fake Bot API server, instant model, gateway in-process)",
    `  messages:   ${result.messages} across ${result.chats} chats (max_concurrent_turns ${result.maxConcurrentTurns})`,
    `  elapsed:    ${result.seconds.toFixed(2)} s`,
    `  throughput: ${result.messagesPerSecond.toFixed(0)} messages/s (${verdict})`,
    `  latency:    p50 ${l.p50.toFixed(1)} ms, p90 ${l.p90.toFixed(1)} ms, p99 ${l.p99.toFixed(1)} ms, max ${l.max.toFixed(1)} ms`,
    `  memory:     RSS ${rssMb.before} MB before, ${rssMb.after} MB after`,
  ].join("\n");
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      messages: { type: "string", default: "2000" },
      chats: { type: "string", default: "50" },
      timeout: { type: "string", default: "120" },
      concurrency: { type: "string" },
      json: { type: "boolean", default: false },
    },
  });
  const result = await runTelegramThroughput({
    messages: Number(values.messages),
    chats: Number(values.chats),
    timeoutMs: Number(values.timeout) * 1000,
    ...(values.concurrency !== undefined && { maxConcurrentTurns: Number(values.concurrency) }),
  });
  console.log(values.json ? JSON.stringify(result) : report(result));
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
