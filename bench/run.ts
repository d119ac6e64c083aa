/**
 * `npm run bench`: Keel's benchmarks, section by section, each run `--runs N` times (default 3)
 * with the spread printed, since the machine is shared and noisy.
 *
 * Sections (`--only NAME[,NAME]`, default all, in this order):
 * - `telegram`: messages/s through Telegram long polling (`--messages`, `--chats`,
 *   `--concurrency`, `--timeout`).
 * - `api` (alias `core`): added latency through the OpenAI-compatible API, turns/s with
 *   concurrent sessions, cold start to ready, idle RSS and RSS after many turns
 *   (`--latency-requests`, `--sessions`, `--turns`).
 * - `lifecycle`: SIGTERM to exit with turns in flight, start to all interrupted sessions resumed
 *   (`--in-flight`, `--resume-sessions`, `--resume-concurrency`).
 *
 * `--json` prints one JSON object with every run's raw figures instead of the text report.
 */
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { type CoreResult, runCore } from "./core.js";
import { type ResumeResult, runResume, runStopInFlight, type StopResult } from "./lifecycle.js";
import { spread, verdict } from "./stats.js";
import { runTelegramThroughput, type ThroughputResult } from "./telegram-throughput.js";

const TARGET_MESSAGES_PER_SECOND = 300;
const SECTIONS = ["telegram", "api", "lifecycle"] as const;
type Section = (typeof SECTIONS)[number];

type Values = ReturnType<typeof parseOptions>["values"];

function parseOptions() {
  return parseArgs({
    options: {
      only: { type: "string" },
      runs: { type: "string", default: "3" },
      json: { type: "boolean", default: false },
      messages: { type: "string", default: "2000" },
      chats: { type: "string", default: "50" },
      timeout: { type: "string", default: "120" },
      concurrency: { type: "string" },
      "latency-requests": { type: "string", default: "2000" },
      sessions: { type: "string", default: "50" },
      turns: { type: "string", default: "10000" },
      "in-flight": { type: "string", default: "20" },
      "resume-sessions": { type: "string", default: "100" },
      "resume-concurrency": { type: "string", default: "8" },
    },
  });
}

function selectedSections(only: string | undefined): Section[] {
  if (!only) return [...SECTIONS];
  const names = only.split(",").map((s) => (s.trim() === "core" ? "api" : s.trim()));
  for (const name of names) {
    if (!(SECTIONS as readonly string[]).includes(name))
      throw new Error(`unknown section ${name}; known: ${SECTIONS.join(", ")} (core = api)`);
  }
  return names as Section[];
}

const load = () => {
  try {
    return execFileSync("uptime", { encoding: "utf8" }).trim();
  } catch {
    return `load average: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(", ")}`;
  }
};

const pick = <T>(runs: T[], f: (r: T) => number) => runs.map(f);

async function telegram(values: Values, runs: number): Promise<ThroughputResult[]> {
  const results: ThroughputResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    results.push(
      await runTelegramThroughput({
        messages: Number(values.messages),
        chats: Number(values.chats),
        timeoutMs: Number(values.timeout) * 1000,
        ...(values.concurrency !== undefined && { maxConcurrentTurns: Number(values.concurrency) }),
      }),
    );
  }
  return results;
}

function telegramReport(results: ThroughputResult[]): string {
  const first = results[0]!;
  const mps = pick(results, (r) => r.messagesPerSecond);
  const sorted = [...mps].sort((a, b) => a - b);
  const med = sorted[Math.ceil(sorted.length / 2) - 1]!;
  return [
    "Telegram polling throughput (fake Bot API server, instant model, gateway in-process)",
    `  messages:   ${first.messages} across ${first.chats} chats (max_concurrent_turns ${first.maxConcurrentTurns})`,
    `  throughput: ${spread(mps, 0)} messages/s (target ${verdict(med, TARGET_MESSAGES_PER_SECOND, false)})`,
    `  latency:    p50 ${spread(pick(results, (r) => r.latencyMs.p50))} ms, p99 ${spread(pick(results, (r) => r.latencyMs.p99))} ms`,
    `  memory:     RSS after ${spread(
      pick(results, (r) => r.rssMb.after),
      0,
    )} MB (bench process)`,
  ].join("\n");
}

async function api(values: Values, runs: number): Promise<CoreResult[]> {
  const results: CoreResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    results.push(
      await runCore({
        latencyRequests: Number(values["latency-requests"]),
        warmup: 200,
        sessions: Number(values.sessions),
        turns: Number(values.turns),
        throughputTurns: 2000,
        coldStarts: 5,
      }),
    );
  }
  return results;
}

/** One figure: the spread over runs, and the target judged on the median. */
function line(label: string, values: number[], unit: string, target: number, below: boolean) {
  const sorted = [...values].sort((a, b) => a - b);
  const med = sorted[Math.ceil(sorted.length / 2) - 1]!;
  return `  ${label.padEnd(30)} ${spread(values)} ${unit}   target ${verdict(med, target, below)}`;
}

function apiReport(results: CoreResult[]): string {
  const r0 = results[0]!;
  return [
    "OpenAI-compatible API (built gateway in a child process, instant fake model in this process)",
    line(
      "added latency p50",
      pick(results, (r) => r.latencyMs.added.p50),
      "ms",
      3,
      true,
    ),
    line(
      "added latency p99",
      pick(results, (r) => r.latencyMs.added.p99),
      "ms",
      15,
      true,
    ),
    `    (through the gateway p50 ${spread(
      pick(results, (r) => r.latencyMs.gateway.p50),
      2,
    )} ms, p99 ${spread(
      pick(results, (r) => r.latencyMs.gateway.p99),
      2,
    )} ms;` +
      ` straight to the model p50 ${spread(
        pick(results, (r) => r.latencyMs.direct.p50),
        2,
      )} ms, p99 ${spread(
        pick(results, (r) => r.latencyMs.direct.p99),
        2,
      )} ms)`,
    line(
      "turns/s, concurrent sessions",
      pick(results, (r) => r.turnsPerSecond),
      "turns/s",
      500,
      false,
    ),
    `    (first 2000 turns; over all ${r0.rssMb.turns - r0.latencyRequests} turns of the phase: ${spread(
      pick(results, (r) => r.turnsPerSecondOverall),
      0,
    )} turns/s)`,
    line(
      "cold start to ready (median of 5)",
      pick(results, (r) => r.readyMs.median),
      "ms",
      500,
      true,
    ),
    `    (every start: ${results.map((r) => r.readyMs.all.map((v) => v.toFixed(0)).join("/")).join("; ")} ms)`,
    line(
      "idle RSS",
      pick(results, (r) => r.rssMb.idle),
      "MB",
      80,
      true,
    ),
    `  ${"RSS after the latency phase".padEnd(30)} ${spread(pick(results, (r) => r.rssMb.afterLatency))} MB`,
    `  ${`RSS after ${r0.rssMb.turns} turns`.padEnd(30)} ${spread(pick(results, (r) => r.rssMb.afterTurns))} MB`,
    line(
      "RSS growth",
      pick(results, (r) => r.rssMb.growth),
      "MB",
      30,
      true,
    ),
    `  non-200 answers: ${pick(results, (r) => r.errors).join(", ")}`,
  ].join("\n");
}

async function lifecycle(values: Values, runs: number) {
  const stop: StopResult[] = [];
  const resume: ResumeResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    stop.push(await runStopInFlight(Number(values["in-flight"])));
    resume.push(
      await runResume(Number(values["resume-sessions"]), Number(values["resume-concurrency"])),
    );
  }
  return { stop, resume };
}

function lifecycleReport({ stop, resume }: Awaited<ReturnType<typeof lifecycle>>): string {
  return [
    "Lifecycle (built gateway in a child process)",
    line(
      `SIGTERM to exit, ${stop[0]!.inFlight} in flight`,
      pick(stop, (r) => r.ms),
      "ms",
      1000,
      true,
    ),
    `    (exit codes: ${stop.map((r) => r.exitCode).join(", ")})`,
    line(
      `start to ${resume[0]!.sessions} sessions resumed`,
      pick(resume, (r) => r.allResumedMs),
      "ms",
      2000,
      true,
    ),
    `    (of which start to ready ${spread(pick(resume, (r) => r.readyMs))} ms; max_concurrent_turns ${resume[0]!.concurrency} while resuming)`,
  ].join("\n");
}

async function main(): Promise<number> {
  const { values } = parseOptions();
  const runs = Math.max(1, Number(values.runs));
  const json: Record<string, unknown> = {};
  for (const section of selectedSections(values.only)) {
    const before = load();
    let text: string;
    if (section === "telegram") {
      const results = await telegram(values, runs);
      json.telegram = results;
      text = telegramReport(results);
    } else if (section === "api") {
      const results = await api(values, runs);
      json.api = results;
      text = apiReport(results);
    } else {
      const results = await lifecycle(values, runs);
      json.lifecycle = results;
      text = lifecycleReport(results);
    }
    if (!values.json) console.log(`${text}\n  load before: ${before}\n  load after:  ${load()}\n`);
  }
  if (values.json) console.log(JSON.stringify(json));
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
