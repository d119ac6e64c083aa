/**
 * Slow stream clients (issue 42, step 4): the BUILT gateway in a child process with the shipped
 * defaults (`http.max_buffered_bytes` 8 MiB, `agent.max_concurrent_turns` 8), the stand-in model
 * and the slow clients in another (bench/slow-clients-load.ts), the normal sessions and the
 * timing here.
 *
 * 1. Baseline: `normalSessions` sessions, each doing sequential non-stream turns, for `windowMs`.
 * 2. `slowClients` clients each stream one long answer (`deltas` text deltas of `piece`) and read
 *    it at `readBytes` per `readEveryMs`. Once the gateway has finished all their turns (every
 *    delta handed to its stream: what waits for them now is in the gateway or the kernel), the
 *    same normal sessions run again for `windowMs` while the slow clients go on reading.
 *
 * Peak RSS is sampled every 50 ms from the slow clients' start to the window's end. The window
 * starts after their turns so that it measures what slow readers cost everyone else (memory, the
 * collector, the writes as they drain), not the model's own burst of 50 long answers, which
 * would hold the turn slots whatever the clients did.
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort, REPO_ROOT } from "../test/helpers/gateway-process.js";
import { GatewayChild } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";
import type { LoadMessage, SlowStart, SlowStatus } from "./slow-clients-load.js";
import { percentile } from "./stats.js";

export interface SlowClientsOptions {
  slowClients: number;
  /** Text deltas in each slow client's answer. */
  deltas: number;
  /** The text of each delta. */
  piece: string;
  readBytes: number;
  readEveryMs: number;
  normalSessions: number;
  /** How long each phase of normal sessions lasts. */
  windowMs: number;
  /** Untimed normal turns first, for that long. */
  warmupMs: number;
}

export interface Latency {
  p50: number;
  p99: number;
  turns: number;
  errors: number;
}

export interface SlowClientsResult {
  options: SlowClientsOptions;
  idleRssMb: number;
  /** Peak RSS from the slow clients' start to the end of the window. */
  peakRssMb: number;
  baseline: Latency;
  withSlow: Latency;
  /** Slow clients' start to the gateway's last turn of theirs finished. */
  turnsDoneMs: number;
  /** The slow clients when the window began, and when it ended. */
  atStart: SlowStatus;
  atEnd: SlowStatus;
  /** "api stream client cut off" lines in the gateway's log. */
  cutOffLogged: number;
  /** The slow clients' start to their stop. */
  slowPhaseMs: number;
}

const PATH = "/v1/chat/completions";

export async function runSlowClients(options: SlowClientsOptions): Promise<SlowClientsResult> {
  const load = fork(
    join(REPO_ROOT, "bench", "slow-clients-load.ts"),
    [String(options.deltas), options.piece],
    { execArgv: ["--import", "tsx"], stdio: ["ignore", "ignore", "inherit", "ipc"] },
  );
  const home = mkdtempSync(join(tmpdir(), "keel-bench-slow-"));
  const outputFile = join(home, "bench-output.log");
  let gateway: GatewayChild | undefined;
  try {
    const { baseUrl } = await message(load, "model");
    gateway = GatewayChild.spawn({
      home,
      port: await freePort(),
      env: { OPENAI_BASE_URL: baseUrl, KEEL_MODEL: "bench-model" },
      outputFile,
    });
    await gateway.waitReady();
    const gw = gateway;
    const client = new HttpClient(gw.baseUrl, gw.authHeaders());
    try {
      await normalTurns(client, options.normalSessions, options.warmupMs);
      await sleep(1000);
      const idleRssMb = gw.rssMb();
      const baseline = await normalTurns(client, options.normalSessions, options.windowMs);
      const turnsBefore = await apiTurns(gw);
      let peakRssMb = gw.rssMb();
      const sampler = setInterval(() => {
        peakRssMb = Math.max(peakRssMb, gw.rssMb());
      }, 50);
      try {
        const started = performance.now();
        const start: SlowStart = {
          type: "start",
          baseUrl: gw.baseUrl,
          token: gw.controlToken(),
          clients: options.slowClients,
          readBytes: options.readBytes,
          readEveryMs: options.readEveryMs,
        };
        load.send(start);
        await message(load, "started");
        // A poll may meet a keep-alive socket the busy gateway just closed: it counts as "not yet".
        while ((await apiTurns(gw).catch(() => -1)) < turnsBefore + options.slowClients) {
          if (performance.now() - started > 300_000) throw new Error("slow clients' turns hung");
          await sleep(100);
        }
        const turnsDoneMs = performance.now() - started;
        load.send({ type: "status" });
        const atStart = await message(load, "status");
        const withSlow = await normalTurns(client, options.normalSessions, options.windowMs);
        load.send({ type: "stop" });
        const atEnd = await message(load, "stopped");
        const slowPhaseMs = performance.now() - started;
        const cutOffLogged = readFileSync(outputFile, "utf8").split(
          "api stream client cut off",
        ).length;
        return {
          options,
          idleRssMb,
          peakRssMb: Math.max(peakRssMb, gw.rssMb()),
          baseline,
          withSlow,
          turnsDoneMs,
          atStart,
          atEnd,
          cutOffLogged: cutOffLogged - 1,
          slowPhaseMs,
        };
      } finally {
        clearInterval(sampler);
      }
    } finally {
      client.close();
    }
  } finally {
    load.kill("SIGKILL");
    await gateway?.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

/** The next message of `type` from the load child. */
function message<T extends LoadMessage["type"]>(
  child: ChildProcess,
  type: T,
): Promise<Extract<LoadMessage, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: LoadMessage) => {
      if (m.type !== type) return;
      child.off("message", onMessage);
      child.off("exit", onExit);
      resolve(m as Extract<LoadMessage, { type: T }>);
    };
    const onExit = (code: number | null) => reject(new Error(`load child exited (${code})`));
    child.on("message", onMessage);
    child.once("exit", onExit);
  });
}

/** The API turns the gateway has finished, from `/metrics`. */
async function apiTurns(gw: GatewayChild): Promise<number> {
  const res = await fetch(`${gw.baseUrl}/metrics`, { headers: gw.authHeaders() });
  const text = await res.text();
  let turns = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("keel_turns_total{") && line.includes('platform="api"')) {
      turns += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return turns;
}

/** `sessions` sessions, each doing sequential turns on its own session for `ms`. */
async function normalTurns(client: HttpClient, sessions: number, ms: number): Promise<Latency> {
  const samples: number[] = [];
  let errors = 0;
  const until = performance.now() + ms;
  const loop = async (i: number) => {
    let sessionId: string | undefined;
    while (performance.now() < until) {
      const body = { model: "bench-model", messages: [{ role: "user", content: `hello ${i}` }] };
      const res = await client.postJson(PATH, body, sessionId ? { "x-session-id": sessionId } : {});
      if (res.status === 200) samples.push(res.ms);
      else errors += 1;
      sessionId ??= res.headers["x-session-id"] as string | undefined;
    }
  };
  await Promise.all(Array.from({ length: sessions }, (_, i) => loop(i)));
  samples.sort((a, b) => a - b);
  return {
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    turns: samples.length,
    errors,
  };
}
