/**
 * `npm run bench`: Keel's benchmarks, section by section, each run `--runs N` times (default 3)
 * with the spread printed, since the machine is shared and noisy.
 *
 * Sections (`--only NAME[,NAME]`, default all, in this order):
 * - `telegram`: messages/s through Telegram long polling after `--warmup` untimed messages
 *   (`--messages`, `--chats`, `--concurrency`, `--timeout`; `--gateway-node-args` as for `api`).
 * - `slack`: messages/s through Slack Socket Mode, same options and shape as `telegram`.
 * - `discord`: messages/s through the Discord adapter (gateway WebSocket + REST against the
 *   stand-in Discord; same options as `telegram`).
 * - `whatsapp`: messages/s through the WhatsApp Cloud API adapter (signed webhook POSTs in, Graph
 *   API out, against the stand-in; same options as `telegram`; bench/whatsapp-throughput.ts).
 * - `matrix`: messages/s through the Matrix adapter (`/sync` in, room sends out, against the
 *   stand-in homeserver; same options as `telegram`; bench/matrix-throughput.ts).
 * - `api` (alias `core`): added latency through the OpenAI-compatible API, turns/s with
 *   concurrent sessions, both also as ratios to two floors measured in the same run (the `openai`
 *   SDK forwarder, bench/floor-server.ts, and the bare node:http one, bench/bare-floor-server.mjs);
 *   time to first token through `/v1` streaming minus the model's own;
 *   cold start to ready, idle RSS and RSS after many turns, then after
 *   as many again (`--latency-requests`, `--sessions`, `--turns`; `--gateway-node-args="--flag ..."` starts
 *   Keel's gateway, and only it, with those Node/V8 flags, for an A/B of a flag).
 * - `lifecycle`: SIGTERM to exit with turns in flight, start to all interrupted sessions resumed
 *   (`--in-flight`, `--resume-sessions`, `--resume-concurrency`).
 * - `context`: prompt size per turn over a long conversation on an 8k-token model, compaction
 *   time, and the budget check per model call (`--context-turns`, `--budget-checks`).
 *
 * - `first-token`: time to first token added by the gateway on `/v1` streaming, the web chat and
 *   Telegram's preview, against the model direct in the same run (`--first-token-samples`, default
 *   100; bench/first-token.ts).
 *
 * - `sandbox`: what the sandbox (bubblewrap) adds per terminal command: p50/p99 of `true` and a
 *   small `ls -l` through the real terminal tool, unconfined and sandboxed (`--commands`, default
 *   200 of each; bench/sandbox.ts).
 *
 * Not in the default run (it takes a few minutes): `slow-clients` (`npm run bench -- slow-clients`):
 * 50 `/v1` stream clients that read slowly (`--slow-read-bytes` per `--slow-read-every` ms) each
 * take one long answer (`--slow-deltas` text deltas, default 30,000) while a handful of normal
 * sessions (`--normal-sessions`) do sequential non-stream turns: the gateway's peak RSS (target
 * < 250 MB), the normal sessions' latency with the slow clients over without them
 * (`--slow-window` seconds each; target <= 1.5x), and how many slow clients were cut off
 * (`--slow-clients`; bench/slow-clients.ts).
 *
 * Not in the default run (it needs Debian's Dovecot): `email` (`npm run bench -- email`): mails/s
 * through the email adapter against a private Dovecot and the test tree's SMTP server, same
 * options as `telegram` (bench/email-throughput.ts).
 *
 * Not in the default run (it needs Postgres): `cluster` (`npm run bench -- cluster`, or
 * `--only cluster`): turns/s with 1, 2 and 3 gateway processes on one Postgres, and the takeover
 * time after a SIGKILL (`--instances`, `--cluster-sessions`, `--cluster-turns`, `--lease-ttl`,
 * `--interrupted`; bench/cluster.ts), and `restart`: one gateway on Postgres SIGKILLed with
 * `--interrupted` turns in flight and started again at once in its home, until it has finished
 * them (bench/cluster.ts).
 *
 * `--aged` (or `--only aged`): the API figures on an empty store and on an aged one
 * (`--aged-sessions`, default 100,000, and `--aged-messages`, default 2,000,000, written through
 * the store's API), for `--aged-stores` (default `sqlite,postgres`), with `--open-turns` (1,000)
 * turns a SIGKILL left running recovered at the end (bench/aged.ts).
 *
 * `--json` prints one JSON object with every run's raw figures instead of the text report.
 */
import { execFileSync } from "node:child_process";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { type AgedResult, runAged, type StoreKind, type Tail } from "./aged.js";
import {
  type ClusterThroughputResult,
  type RestartResult,
  runClusterThroughput,
  runRestart,
  runTakeover,
  type TakeoverResult,
} from "./cluster.js";
import { CONTEXT_WINDOW, type ContextResult, runContext, THRESHOLD_TOKENS } from "./context.js";
import { type CoreResult, runCore, SETTLE_S } from "./core.js";
import { runDiscordThroughput } from "./discord-throughput.js";
import { runEmailThroughput } from "./email-throughput.js";
import { type FirstTokenResult, firstTokenReport, runFirstToken } from "./first-token.js";
import { type ResumeResult, runResume, runStopInFlight, type StopResult } from "./lifecycle.js";
import { runMatrixThroughput } from "./matrix-throughput.js";
import { runSandboxBench, type SandboxBenchResult } from "./sandbox.js";
import { runSlackThroughput } from "./slack-throughput.js";
import { runSlowClients, type SlowClientsResult } from "./slow-clients.js";
import { spread, verdict } from "./stats.js";
import { runTelegramThroughput, type ThroughputResult } from "./telegram-throughput.js";
import { runWhatsappThroughput } from "./whatsapp-throughput.js";

const TARGET_MESSAGES_PER_SECOND = 300;
const SECTIONS = [
  "telegram",
  "slack",
  "discord",
  "whatsapp",
  "matrix",
  "api",
  "lifecycle",
  "context",
  "first-token",
  "sandbox",
] as const;
/**
 * Run only when named: they need more than this machine alone (a Postgres server, Dovecot), or
 * take minutes (`slow-clients`: 1.5 million text deltas through the gateway per run).
 */
const NAMED_ONLY = ["cluster", "restart", "email", "aged", "slow-clients"] as const;
type Section = (typeof SECTIONS)[number] | (typeof NAMED_ONLY)[number];
const KNOWN: readonly string[] = [...SECTIONS, ...NAMED_ONLY];

type Values = ReturnType<typeof parseOptions>["values"];

function parseOptions() {
  return parseArgs({
    allowPositionals: true,
    options: {
      only: { type: "string" },
      runs: { type: "string", default: "3" },
      json: { type: "boolean", default: false },
      messages: { type: "string", default: "2000" },
      warmup: { type: "string", default: "1000" },
      chats: { type: "string", default: "50" },
      timeout: { type: "string", default: "120" },
      concurrency: { type: "string" },
      "latency-requests": { type: "string", default: "2000" },
      sessions: { type: "string", default: "50" },
      turns: { type: "string", default: "10000" },
      "gateway-node-args": { type: "string", default: "" },
      "in-flight": { type: "string", default: "20" },
      "resume-sessions": { type: "string", default: "100" },
      "resume-concurrency": { type: "string", default: "8" },
      "context-turns": { type: "string", default: "500" },
      "budget-checks": { type: "string", default: "2000" },
      instances: { type: "string", default: "1,2,3" },
      "cluster-sessions": { type: "string", default: "20" },
      "cluster-turns": { type: "string", default: "600" },
      "lease-ttl": { type: "string", default: "5" },
      interrupted: { type: "string", default: "5" },
      commands: { type: "string", default: "200" },
      "first-token-samples": { type: "string", default: "100" },
      "slow-clients": { type: "string", default: "50" },
      "slow-deltas": { type: "string", default: "30000" },
      "slow-read-bytes": { type: "string", default: "2048" },
      "slow-read-every": { type: "string", default: "100" },
      "normal-sessions": { type: "string", default: "5" },
      "slow-window": { type: "string", default: "10" },
      aged: { type: "boolean", default: false },
      "aged-sessions": { type: "string", default: "100000" },
      "aged-messages": { type: "string", default: "2000000" },
      "aged-stores": { type: "string", default: "sqlite,postgres" },
      "aged-requests": { type: "string", default: "200" },
      "open-turns": { type: "string", default: "1000" },
    },
  });
}

/** `--only a,b` or the sections named as arguments (`npm run bench -- cluster`); else the default set. */
function selectedSections(
  only: string | undefined,
  positionals: string[],
  aged: boolean,
): Section[] {
  const named = [...(only ? only.split(",") : []), ...positionals, ...(aged ? ["aged"] : [])];
  if (named.length === 0) return [...SECTIONS];
  const names = named.map((s) => (s.trim() === "core" ? "api" : s.trim()));
  for (const name of names) {
    if (!KNOWN.includes(name))
      throw new Error(`unknown section ${name}; known: ${KNOWN.join(", ")} (core = api)`);
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

async function telegram(
  values: Values,
  runs: number,
  run: typeof runTelegramThroughput = runTelegramThroughput,
): Promise<ThroughputResult[]> {
  const results: ThroughputResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    results.push(
      await run({
        messages: Number(values.messages),
        warmup: Number(values.warmup),
        chats: Number(values.chats),
        timeoutMs: Number(values.timeout) * 1000,
        ...(values.concurrency !== undefined && { maxConcurrentTurns: Number(values.concurrency) }),
        nodeArgs: values["gateway-node-args"].split(" ").filter(Boolean),
      }),
    );
  }
  return results;
}

function telegramReport(
  results: ThroughputResult[],
  title = "Telegram polling throughput (fake Bot API server, instant model, built gateway in a child process)",
  ceiling?: string,
): string {
  const first = results[0]!;
  const mps = pick(results, (r) => r.messagesPerSecond);
  // The target holds for every run, so the slowest run is the one judged.
  const slowest = Math.min(...mps);
  return [
    title,
    `  messages:   ${first.messages} across ${first.chats} chats (max_concurrent_turns ${first.maxConcurrentTurns})`,
    first.warmupMessagesPerSecond === null
      ? "  warm-up:    none (timed from the gateway's first message)"
      : `  warm-up:    untimed messages first, ${spread(
          pick(results, (r) => r.warmupMessagesPerSecond ?? Number.NaN),
          0,
        )} messages/s (a fresh gateway's first messages; --warmup 0 times from the first)`,
    ceiling
      ? `  throughput: ${spread(mps, 0)} messages/s (${ceiling})`
      : `  throughput: ${spread(mps, 0)} messages/s (slowest run ${Math.round(slowest)}: target ${verdict(slowest, TARGET_MESSAGES_PER_SECOND, false)})`,
    `  latency:    p50 ${spread(pick(results, (r) => r.latencyMs.p50))} ms, p99 ${spread(pick(results, (r) => r.latencyMs.p99))} ms`,
    `  CPU:        ${spread(pick(results, (r) => r.cpuMsPerMessage))} ms per message (the gateway's, user + system)`,
    `  memory:     RSS after ${spread(
      pick(results, (r) => r.rssMb.after),
      0,
    )} MB (the gateway's)`,
  ].join("\n");
}

/** The sections that measure messages/s through one platform's adapter, alike but for the title. */
const PLATFORM_BENCHES: Partial<
  Record<Section, { run: typeof runTelegramThroughput; title?: string; ceiling?: string }>
> = {
  telegram: { run: runTelegramThroughput },
  slack: {
    run: runSlackThroughput,
    title:
      "Slack Socket Mode throughput (stand-in Slack, instant model, built gateway in a child process)",
  },
  discord: {
    run: runDiscordThroughput,
    title:
      "Discord throughput (stand-in Discord gateway + REST, instant model, built gateway in a child process)",
    ceiling: "ceiling: Discord allows a bot 50 REST requests/s, and each reply is one",
  },
  whatsapp: {
    run: runWhatsappThroughput,
    title:
      "WhatsApp throughput (stand-in Cloud API: signed webhook in, Graph API out; instant model, built gateway in a child process)",
    ceiling:
      "no Keel target: the Cloud API itself sends 80 messages/s per business number unless Meta raises it",
  },
  matrix: {
    run: runMatrixThroughput,
    title:
      "Matrix throughput (stand-in homeserver: /sync in, room sends out; instant model, built gateway in a child process)",
    ceiling:
      "no Keel target: a homeserver rate-limits a user's sends unless the operator exempts the bot",
  },
  email: {
    run: runEmailThroughput,
    title:
      "Email throughput (private Dovecot IMAP IDLE in, test-tree SMTP out, instant model, built gateway in a child process)",
  },
};

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
        nodeArgs: values["gateway-node-args"].split(" ").filter(Boolean),
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

/** A ratio to the floor measured in the same run: `keel / floor`. */
function ratioLine(label: string, ratios: number[], target: number, below: boolean) {
  const sorted = [...ratios].sort((a, b) => a - b);
  const med = sorted[Math.ceil(sorted.length / 2) - 1]!;
  return `  ${label.padEnd(30)} ${spread(ratios, 2)} × the floor   target ${verdict(med, target, below)}`;
}

function apiReport(results: CoreResult[]): string {
  const r0 = results[0]!;
  const ms = (f: (r: CoreResult) => number) => spread(pick(results, f), 2);
  return [
    "OpenAI-compatible API (built gateway in a child process, instant fake model in this process;",
    "the floors: in-memory forwarders with no storage in front of the same model, same run: one",
    "through the openai SDK (bench/floor-server.ts), one bare: node:http, keep-alive, no SDK)",
    ratioLine(
      "latency p50, Keel / floor",
      pick(results, (r) => r.latencyMs.gateway.p50 / r.latencyMs.floor.p50),
      3,
      true,
    ),
    `    (p50: Keel ${ms((r) => r.latencyMs.gateway.p50)} ms, floor ${ms((r) => r.latencyMs.floor.p50)} ms, model alone ${ms((r) => r.latencyMs.direct.p50)} ms)`,
    ratioLine(
      "added p50, Keel / bare floor",
      pick(
        results,
        (r) =>
          (r.latencyMs.gateway.p50 - r.latencyMs.direct.p50) /
          (r.latencyMs.bare.p50 - r.latencyMs.direct.p50),
      ),
      3,
      true,
    ),
    `    (added at p50: Keel ${ms((r) => r.latencyMs.gateway.p50 - r.latencyMs.direct.p50)} ms, bare floor ${ms((r) => r.latencyMs.bare.p50 - r.latencyMs.direct.p50)} ms, SDK floor ${ms((r) => r.latencyMs.floor.p50 - r.latencyMs.direct.p50)} ms; bare p99 ${ms((r) => r.latencyMs.bare.p99)} ms)`,
    line(
      "time to first token, added p50",
      pick(results, (r) => r.ttftMs.added),
      "ms",
      2,
      true,
    ),
    `    (/v1 streaming, first chunk with text: Keel ${ms((r) => r.ttftMs.gateway)} ms, model alone ${ms((r) => r.ttftMs.direct)} ms)`,
    line(
      "added latency p99",
      pick(results, (r) => r.latencyMs.added.p99),
      "ms",
      15,
      true,
    ),
    `    (p99 / max: Keel ${ms((r) => r.latencyMs.gateway.p99)} / ${ms((r) => r.latencyMs.gateway.max)} ms, floor ${ms((r) => r.latencyMs.floor.p99)} / ${ms((r) => r.latencyMs.floor.max)} ms, model alone ${ms((r) => r.latencyMs.direct.p99)} ms)`,
    ratioLine(
      "turns/s, concurrent, Keel/floor",
      pick(results, (r) => r.turnsPerSecond / r.floorTurnsPerSecond),
      0.4,
      false,
    ),
    `    (Keel ${spread(
      pick(results, (r) => r.turnsPerSecond),
      0,
    )} turns/s, floor ${spread(
      pick(results, (r) => r.floorTurnsPerSecond),
      0,
    )} turns/s; first 2000 turns of ${r0.rssMb.turns - r0.latencyRequests}, Keel over all of them ${spread(
      pick(results, (r) => r.turnsPerSecondOverall),
      0,
    )} turns/s)`,
    ratioLine(
      "turns/s, Keel / bare floor",
      pick(results, (r) => r.turnsPerSecond / r.bareTurnsPerSecond),
      0.5,
      false,
    ),
    `    (bare floor ${spread(
      pick(results, (r) => r.bareTurnsPerSecond),
      0,
    )} turns/s, the same sessions and window)`,
    line(
      "event-loop delay p99 (load)",
      pick(results, (r) => r.loopDelayMs.p99),
      "ms",
      10,
      true,
    ),
    `    (p50 ${ms((r) => r.loopDelayMs.p50)} ms, max ${ms((r) => r.loopDelayMs.max)} ms, while the concurrent sessions ran)`,
    line(
      "cold start to ready (median of 5)",
      pick(results, (r) => r.readyMs.median),
      "ms",
      500,
      true,
    ),
    `    (every start: ${results.map((r) => r.readyMs.all.map((v) => v.toFixed(0)).join("/")).join("; ")} ms)`,
    line(
      `idle RSS (${SETTLE_S} s after ready)`,
      pick(results, (r) => r.rssMb.idle),
      "MB",
      80,
      true,
    ),
    line(
      "idle RSS, 0.5 s after ready",
      pick(results, (r) => r.rssMb.afterReady),
      "MB",
      80,
      true,
    ),
    `  ${"RSS after the latency phase".padEnd(30)} ${spread(pick(results, (r) => r.rssMb.afterLatency))} MB`,
    `  ${`RSS after ${r0.rssMb.turns} turns`.padEnd(30)} ${spread(pick(results, (r) => r.rssMb.afterTurns))} MB`,
    // Read twice: half a second after the turns RSS still holds garbage V8 has not collected
    // (as the plain forwarder's does); settled, it is what a quiet gateway keeps.
    line(
      "RSS growth, 0.5 s after",
      pick(results, (r) => r.rssMb.growth),
      "MB",
      30,
      true,
    ),
    `    (the floor: ${spread(pick(results, (r) => r.rssMb.floor.growth))} MB)`,
    line(
      `RSS growth, settled (${SETTLE_S} s)`,
      pick(results, (r) => r.rssMb.settledGrowth),
      "MB",
      30,
      true,
    ),
    `    (the floor through the same turns, given memory back the same way: ${spread(pick(results, (r) => r.rssMb.floor.settledGrowth))} MB settled, from ${spread(pick(results, (r) => r.rssMb.floor.idle))} MB idle)`,
    `  ${"RSS growth, settled, next run".padEnd(30)} ${spread(pick(results, (r) => r.rssMb.secondRunGrowth))} MB (the same turns again, new sessions, settled to settled: flat memory is ~0)`,
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

async function context(values: Values, runs: number): Promise<ContextResult[]> {
  const results: ContextResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    results.push(
      await runContext({
        turns: Number(values["context-turns"]),
        checks: Number(values["budget-checks"]),
      }),
    );
  }
  return results;
}

function contextReport(results: ContextResult[]): string {
  const r0 = results[0]!;
  return [
    `Long conversation (in-process gateway, fake model with a ${CONTEXT_WINDOW}-token window)`,
    line(
      `largest prompt over ${r0.turns} turns`,
      pick(results, (r) => r.promptTokens.max),
      "tokens",
      THRESHOLD_TOKENS,
      true,
    ),
    `    (median prompt ${spread(
      pick(results, (r) => r.promptTokens.p50),
      0,
    )} tokens; summary calls ${results.map((r) => r.summaryCalls).join(", ")}; failed turns ${results.map((r) => r.failedTurns).join(", ")})`,
    `  ${"/compact on that conversation".padEnd(30)} ${spread(pick(results, (r) => r.compactMs))} ms`,
    line(
      "budget check per model call",
      pick(results, (r) => r.budgetCheckMs.mean),
      "ms",
      0.5,
      true,
    ),
    `    (p99 ${spread(
      pick(results, (r) => r.budgetCheckMs.p99),
      3,
    )} ms; 200 messages, 32k window, about 60 % full)`,
  ].join("\n");
}

async function cluster(values: Values, runs: number) {
  const throughput: ClusterThroughputResult[][] = [];
  const takeover: TakeoverResult[] = [];
  const counts = values.instances.split(",").map(Number);
  for (let i = 0; i < runs; i += 1) {
    const round: ClusterThroughputResult[] = [];
    for (const instances of counts) {
      round.push(
        await runClusterThroughput({
          instances,
          sessions: Number(values["cluster-sessions"]),
          turns: Number(values["cluster-turns"]),
        }),
      );
    }
    throughput.push(round);
    takeover.push(
      await runTakeover({
        leaseTtlSeconds: Number(values["lease-ttl"]),
        interrupted: Number(values.interrupted),
      }),
    );
  }
  return { throughput, takeover };
}

function clusterReport({ throughput, takeover }: Awaited<ReturnType<typeof cluster>>): string {
  const first = throughput[0]!;
  const t0 = takeover[0]!;
  const lines = [
    "Several gateways on one Postgres (built gateways in child processes on this one machine,",
    "instant fake model; the overhead of sharing, not scaling)",
  ];
  first.forEach((r, i) => {
    const tps = throughput.map((round) => round[i]!.turnsPerSecond);
    const errors = throughput.map((round) => round[i]!.errors).join(", ");
    lines.push(
      `  ${`turns/s, ${r.instances} gateway(s)`.padEnd(30)} ${spread(tps, 0)}   (${r.sessions} API sessions, each on one gateway, ${r.turns} turns; non-200: ${errors})`,
    );
  });
  lines.push(
    `  ${"takeover after SIGKILL".padEnd(30)} ${spread(
      pick(takeover, (r) => r.allMs / 1000),
      2,
    )} s until all ${t0.interrupted} cut turns finished (first ${spread(
      pick(takeover, (r) => r.firstMs / 1000),
      2,
    )} s; lease TTL ${t0.leaseTtlSeconds} s: expected between 1 and 2 TTLs plus the resumed turn)`,
  );
  return lines.join("\n");
}

function restartReport(results: RestartResult[]): string {
  const ms = (f: (r: RestartResult) => number) =>
    spread(
      pick(results, (r) => f(r) / 1000),
      2,
    );
  return [
    "One gateway on Postgres, SIGKILLed and started again at once in its home (shipped lease TTL)",
    `  ${"ready after SIGKILL".padEnd(30)} ${ms((r) => r.readyMs)} s`,
    `  ${"cut-off turns finished".padEnd(30)} ${ms((r) => r.allMs)} s after SIGKILL, all ${results[0]!.interrupted} (first ${ms((r) => r.firstMs)} s)`,
  ].join("\n");
}

async function aged(values: Values, runs: number): Promise<AgedResult[]> {
  const results: AgedResult[] = [];
  for (const store of values["aged-stores"].split(",") as StoreKind[]) {
    for (let i = 0; i < runs; i += 1) {
      results.push(
        await runAged({
          store,
          sessions: Number(values["aged-sessions"]),
          messages: Number(values["aged-messages"]),
          requests: Number(values["aged-requests"]),
          openTurns: Number(values["open-turns"]),
          coldStarts: 3,
          progress: (text) => console.error(`  [aged] ${text} (${load()})`),
        }),
      );
    }
  }
  return results;
}

/** One row: empty and aged (spread over runs), the ratio aged/empty, and the targets. */
function agedRow(
  results: AgedResult[],
  label: string,
  pickOne: (figures: AgedResult["aged"]) => number,
  ratioTarget: number | null,
  absolute: { target: number; unit: string } | null,
  digits = 1,
): string {
  const empty = pick(results, (r) => pickOne(r.empty));
  const agedValues = pick(results, (r) => pickOne(r.aged));
  const ratios = results.map((r) => pickOne(r.aged) / pickOne(r.empty));
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.ceil(v.length / 2) - 1]!;
  const targets = [
    ratioTarget === null ? "" : `ratio ${verdict(med(ratios), ratioTarget, true)}`,
    absolute ? `aged ${verdict(med(agedValues), absolute.target, true)} ${absolute.unit}` : "",
  ].filter(Boolean);
  return `  ${label.padEnd(26)} empty ${spread(empty, digits)}, aged ${spread(agedValues, digits)}, aged/empty ${spread(ratios, 2)}   ${targets.join("; ")}`;
}

function agedReport(results: AgedResult[]): string {
  const lines: string[] = [];
  for (const kind of ["sqlite", "postgres"] as StoreKind[]) {
    const rs = results.filter((r) => r.store === kind);
    if (rs.length === 0) continue;
    const r0 = rs[0]!;
    const t = (f: (s: AgedResult["aged"]) => Tail, p: keyof Tail) => (s: AgedResult["aged"]) =>
      f(s)[p];
    const ms = { target: 20, unit: "ms" };
    lines.push(
      `Aged store, ${kind}: ${r0.sessions} sessions, ${r0.messages} messages through the store's API (seeded in ${spread(
        pick(rs, (r) => r.seedSeconds),
        0,
      )} s), against an empty store`,
      agedRow(
        rs,
        "turn latency p50 (ms)",
        t((s) => s.turnMs, "p50"),
        1.2,
        null,
        2,
      ),
      agedRow(
        rs,
        "turn latency p99 (ms)",
        t((s) => s.turnMs, "p99"),
        1.2,
        null,
        2,
      ),
      agedRow(rs, "spawn to /readyz (ms)", (s) => s.readyMs, 1.5, null, 0),
      `  ${"idle RSS (MB)".padEnd(26)} empty ${spread(pick(rs, (r) => r.empty.idleRssMb))}, aged ${spread(pick(rs, (r) => r.aged.idleRssMb))}, growth ${spread(pick(rs, (r) => r.aged.idleRssMb - r.empty.idleRssMb))} MB   target < +20 MB: ${Math.max(...rs.map((r) => r.aged.idleRssMb - r.empty.idleRssMb)) < 20 ? "met" : "MISSED"}`,
      agedRow(
        rs,
        "/api/status p50 (ms)",
        t((s) => s.statusMs, "p50"),
        2,
        ms,
        2,
      ),
      agedRow(
        rs,
        "/api/status p90 (ms)",
        t((s) => s.statusMs, "p90"),
        2,
        ms,
        2,
      ),
      agedRow(
        rs,
        "/api/sessions p50 (ms)",
        t((s) => s.sessionsMs, "p50"),
        2,
        ms,
        2,
      ),
      agedRow(
        rs,
        "/api/sessions p90 (ms)",
        t((s) => s.sessionsMs, "p90"),
        2,
        ms,
        2,
      ),
      agedRow(
        rs,
        "dashboard load p50 (ms)",
        t((s) => s.dashboardMs, "p50"),
        2,
        ms,
        2,
      ),
      agedRow(
        rs,
        "dashboard load p90 (ms)",
        t((s) => s.dashboardMs, "p90"),
        2,
        ms,
        2,
      ),
      `    (dashboard load: the page and the three reads its script makes, /api/sessions at its default 100; non-200: ${rs.map((r) => r.empty.errors + r.aged.errors).join(", ")})`,
      line(
        `recovery, ${r0.recovery.openTurns} open turns: ready`,
        pick(rs, (r) => r.recovery.readyMs),
        "ms",
        2000,
        true,
      ),
      `    (spawn to every cut-off turn answered: ${spread(
        pick(rs, (r) => r.recovery.allAnsweredMs),
        0,
      )} ms, at agent.max_concurrent_turns 8)`,
    );
  }
  return lines.join("\n");
}

async function slowClients(values: Values, runs: number): Promise<SlowClientsResult[]> {
  const results: SlowClientsResult[] = [];
  for (let i = 0; i < runs; i += 1) {
    results.push(
      await runSlowClients({
        slowClients: Number(values["slow-clients"]),
        deltas: Number(values["slow-deltas"]),
        piece: "tok ",
        readBytes: Number(values["slow-read-bytes"]),
        readEveryMs: Number(values["slow-read-every"]),
        normalSessions: Number(values["normal-sessions"]),
        windowMs: Number(values["slow-window"]) * 1000,
        warmupMs: 3000,
      }),
    );
  }
  return results;
}

function slowClientsReport(results: SlowClientsResult[]): string {
  const o = results[0]!.options;
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.ceil(v.length / 2) - 1]!;
  const ratio = (label: string, f: (l: SlowClientsResult["baseline"]) => number) => {
    const ratios = pick(results, (r) => f(r.withSlow) / f(r.baseline));
    const met = med(ratios) <= 1.5 ? "met" : "MISSED";
    return [
      `  ${`normal ${label}, with / without`.padEnd(34)} ${spread(ratios, 2)} ×   target <= 1.5: ${met}`,
      `    (${label} with the slow clients ${spread(
        pick(results, (r) => f(r.withSlow)),
        2,
      )} ms, without ${spread(
        pick(results, (r) => f(r.baseline)),
        2,
      )} ms)`,
    ];
  };
  const status = (s: SlowClientsResult["atEnd"]) =>
    `${s.reading} reading, ${s.complete} read to the end, ${s.cutOff} cut off${s.failed ? `, ${s.failed} failed` : ""}`;
  const events = results.flatMap((r) => r.atEnd.eventsPerComplete);
  return [
    `Slow stream clients (built gateway in a child process, shipped defaults: http.max_buffered_bytes 8 MiB;`,
    `the stand-in model and the slow clients in another process, the normal sessions here)`,
    `  ${o.slowClients} clients each stream one answer of ${o.deltas} deltas of "${o.piece}" and read ${o.readBytes} bytes per ${o.readEveryMs} ms;`,
    `  ${o.normalSessions} normal sessions do sequential non-stream turns for ${o.windowMs / 1000} s alone, then ${o.windowMs / 1000} s once the slow clients' turns are done`,
    line(
      "peak RSS, slow clients reading",
      pick(results, (r) => r.peakRssMb),
      "MB",
      250,
      true,
    ),
    `    (idle before them ${spread(pick(results, (r) => r.idleRssMb))} MB; their ${o.slowClients} turns done ${spread(
      pick(results, (r) => r.turnsDoneMs / 1000),
      1,
    )} s after they started)`,
    ...ratio("latency p50", (l) => l.p50),
    ...ratio("latency p99", (l) => l.p99),
    `    (normal turns: ${results.map((r) => `${r.baseline.turns} without, ${r.withSlow.turns} with`).join("; ")}; non-200: ${results.map((r) => r.baseline.errors + r.withSlow.errors).join(", ")})`,
    `  ${"slow clients cut off".padEnd(34)} ${results.map((r) => r.atEnd.cutOff).join(", ")} of ${o.slowClients}   (gateway log lines: ${results.map((r) => r.cutOffLogged).join(", ")})`,
    `    (when the window began: ${results.map((r) => status(r.atStart)).join("; ")})`,
    `    (when it ended: ${results.map((r) => status(r.atEnd)).join("; ")})`,
    `    (events per answer read to the end: ${events.length > 0 ? `median ${med(events)}, max ${Math.max(...events)}` : "none read to the end"}, for ${o.deltas} deltas; read by the slow clients: ${results.map((r) => `${(r.atEnd.bytesRead / 1_048_576).toFixed(1)} MiB in ${(r.slowPhaseMs / 1000).toFixed(0)} s, ${(r.atEnd.bytesRead / o.slowClients / r.slowPhaseMs).toFixed(1)} KB/s each`).join("; ")})`,
  ].join("\n");
}

async function sandbox(values: Values, runs: number): Promise<SandboxBenchResult[]> {
  const results: SandboxBenchResult[] = [];
  for (let i = 0; i < runs; i += 1) results.push(await runSandboxBench(Number(values.commands)));
  return results;
}

function sandboxReport(results: SandboxBenchResult[]): string {
  const ms = (f: (r: SandboxBenchResult) => number) => spread(pick(results, f), 2);
  const row = (label: string, kind: "true" | "ls") =>
    `  ${label.padEnd(30)} p50 ${ms((r) => r.plain[kind].p50)} -> ${ms((r) => r.sandboxed[kind].p50)} ms, ` +
    `p99 ${ms((r) => r.plain[kind].p99)} -> ${ms((r) => r.sandboxed[kind].p99)} ms`;
  return [
    `Sandbox cost per command (the terminal tool, unconfined -> under bubblewrap; ${results[0]!.commands} of each per run)`,
    row("true", "true"),
    row("ls -l (20 files)", "ls"),
    `  ${"added at p50, true".padEnd(30)} ${ms((r) => r.sandboxed.true.p50 - r.plain.true.p50)} ms`,
  ].join("\n");
}

async function main(): Promise<number> {
  const { values, positionals } = parseOptions();
  const runs = Math.max(1, Number(values.runs));
  const json: Record<string, unknown> = {};
  for (const section of selectedSections(values.only, positionals, values.aged)) {
    const before = load();
    let text: string;
    const platform = PLATFORM_BENCHES[section];
    if (platform) {
      const results = await telegram(values, runs, platform.run);
      json[section] = results;
      text = telegramReport(results, platform.title, platform.ceiling);
    } else if (section === "api") {
      const results = await api(values, runs);
      json.api = results;
      text = apiReport(results);
    } else if (section === "cluster") {
      const results = await cluster(values, runs);
      json.cluster = results;
      text = clusterReport(results);
    } else if (section === "aged") {
      const results = await aged(values, runs);
      json.aged = results;
      text = agedReport(results);
    } else if (section === "restart") {
      const results: RestartResult[] = [];
      for (let i = 0; i < runs; i += 1)
        results.push(await runRestart({ interrupted: Number(values.interrupted) }));
      json.restart = results;
      text = restartReport(results);
    } else if (section === "first-token") {
      const results: FirstTokenResult[] = [];
      for (let i = 0; i < runs; i += 1) {
        results.push(await runFirstToken({ samples: Number(values["first-token-samples"]) }));
      }
      json.firstToken = results;
      text = firstTokenReport(results);
    } else if (section === "sandbox") {
      const results = await sandbox(values, runs);
      json.sandbox = results;
      text = sandboxReport(results);
    } else if (section === "slow-clients") {
      const results = await slowClients(values, runs);
      json["slow-clients"] = results;
      text = slowClientsReport(results);
    } else if (section === "context") {
      const results = await context(values, runs);
      json.context = results;
      text = contextReport(results);
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
