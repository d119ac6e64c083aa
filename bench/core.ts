/**
 * Core figures against the stand-in model answering "ok" at once: added latency per turn through
 * the OpenAI-compatible API, turns per second with concurrent sessions (and the gateway's
 * event-loop delay meanwhile), cold start to ready, idle RSS and RSS after many turns; latency
 * and throughput also through the floor (bench/floor-server.ts), measured in the same run. The gateway is the BUILT command line in a child
 * process (so its RSS is its own); the model and the clients run in this process.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { type FakeOpenAI, startFakeOpenAI } from "../test/fakes/openai-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { FloorChild } from "./floor-child.js";
import { GatewayChild, type LoopDelay } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";
import { median, percentile } from "./stats.js";

export interface CoreOptions {
  /** Sequential requests measured for the added latency (each way), after `warmup`. */
  latencyRequests: number;
  warmup: number;
  /** Concurrent API sessions for the throughput figure. */
  sessions: number;
  /** Turns through the API (spread over the sessions) before the second RSS reading. */
  turns: number;
  /** Turns (from the start of the concurrent phase) the throughput figure is taken over. */
  throughputTurns: number;
  coldStarts: number;
  /** Node/V8 flags for Keel's gateway child only (the floor and the model keep the defaults). */
  nodeArgs?: string[];
}

export interface CoreResult {
  latencyMs: {
    gateway: { p50: number; p99: number; max: number };
    direct: { p50: number; p99: number; max: number };
    /** Through the floor forwarder (bench/floor-server.ts). */
    floor: { p50: number; p99: number; max: number };
    /** Through the bare floor (bench/bare-floor-server.mjs: node:http, no SDK). */
    bare: { p50: number; p99: number; max: number };
    added: { p50: number; p99: number };
  };
  /**
   * Time to first token through `/v1` streaming: request start to the first chunk with text,
   * direct to the model and through Keel (interleaved), p50 in ms.
   */
  ttftMs: { gateway: number; direct: number; added: number };
  turnsPerSecond: number;
  turnsPerSecondOverall: number;
  /** The floor's turns/s with the same sessions and window. */
  floorTurnsPerSecond: number;
  /** The bare floor's turns/s with the same sessions and window. */
  bareTurnsPerSecond: number;
  /** The gateway's event-loop delay while the concurrent sessions ran. */
  loopDelayMs: LoopDelay;
  readyMs: { median: number; all: number[] };
  rssMb: {
    /** SETTLE_S after ready, quiet all along: what an idle gateway holds. */
    idle: number;
    /** 0.5 s after ready (median of the cold starts): start-up's garbage still in it. */
    afterReady: number;
    afterLatency: number;
    afterTurns: number;
    /** afterTurns (0.5 s after the last turn) minus idle (both gateway readings settled or not). */
    growth: number;
    /** The same SETTLE_S after the last turn: what the gateway keeps once quiet. */
    settledGrowth: number;
    /**
     * Settled after a second run of the same turns (new sessions) minus settled after the first:
     * whether what a gateway keeps grows with the turns it has served (flat memory: ~0).
     */
    secondRunGrowth: number;
    /** The floor forwarder's, through the same turns (its idle includes tsx, which runs it). */
    floor: { idle: number; growth: number; settledGrowth: number };
    turns: number;
  };
  errors: number;
  latencyRequests: number;
}

/**
 * Seconds after the last turn for the settled RSS reading: past the gateway's memory settle,
 * which on Node 20 ends with a collection about nine seconds after the turns
 * (src/lifecycle/memory-settle.ts).
 */
export const SETTLE_S = 12;

const BODY = { model: "bench-model", messages: [{ role: "user", content: "hello" }] };
const PATH = "/v1/chat/completions";

/** Runs every core measurement once and tears everything down. */
export async function runCore(options: CoreOptions): Promise<CoreResult> {
  const model = await startFakeOpenAI();
  model.script({ text: "ok" });
  const homes: string[] = [];
  const children: GatewayChild[] = [];
  const spawnOne = async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-bench-core-"));
    homes.push(home);
    const child = GatewayChild.spawn({
      home,
      port: await freePort(),
      env: { OPENAI_BASE_URL: model.baseUrl, KEEL_MODEL: "bench-model" },
      outputFile: join(home, "bench-output.log"),
      loopDelayProbe: true,
      nodeArgs: options.nodeArgs,
    });
    children.push(child);
    return child;
  };
  const floor = new FloorChild(await freePort(), model.baseUrl);
  const bare = new FloorChild(await freePort(), model.baseUrl, true);
  try {
    await floor.waitReady();
    await bare.waitReady();
    const ready: number[] = [];
    const afterReady: number[] = [];
    let gateway: GatewayChild | undefined;
    for (let i = 0; i < options.coldStarts; i += 1) {
      gateway = await spawnOne();
      ready.push(await gateway.waitReady(5));
      await sleep(500);
      afterReady.push(gateway.rssMb());
      if (i < options.coldStarts - 1) await gateway.kill();
    }
    const gw = gateway!;
    // V8 keeps start-up's garbage for seconds; an idle gateway is read once it has settled.
    await sleep(SETTLE_S * 1000 - 500);
    const idle = gw.rssMb();
    const floorIdle = floor.rssMb();
    const latency = await measureLatency(model, gw, floor, bare, options);
    const ttftMs = await measureTtft(model, gw, options);
    const rssBefore = gw.rssMb();
    await gw.resetLoopDelay();
    const load = await concurrentTurns(gw.baseUrl, gw.authHeaders(), options);
    const loopDelayMs = await gw.readLoopDelay();
    const rss = await rssAfterLoad(() => gw.rssMb());
    const again = await concurrentTurns(gw.baseUrl, gw.authHeaders(), options);
    const rssAgain = await rssAfterLoad(() => gw.rssMb());
    const floorLoad = await concurrentTurns(floor.baseUrl, {}, options);
    const floorRss = await rssAfterLoad(() => floor.rssMb());
    const bareLoad = await concurrentTurns(bare.baseUrl, {}, options);
    return {
      latencyMs: latency,
      ttftMs,
      turnsPerSecond: load.turnsPerSecond,
      turnsPerSecondOverall: load.overall,
      floorTurnsPerSecond: floorLoad.turnsPerSecond,
      bareTurnsPerSecond: bareLoad.turnsPerSecond,
      loopDelayMs,
      readyMs: { median: median(ready), all: ready },
      rssMb: {
        idle,
        afterReady: median(afterReady),
        afterLatency: rssBefore,
        afterTurns: rss.after,
        growth: rss.after - idle,
        settledGrowth: rss.settled - idle,
        secondRunGrowth: rssAgain.settled - rss.settled,
        floor: {
          idle: floorIdle,
          growth: floorRss.after - floorIdle,
          settledGrowth: floorRss.settled - floorIdle,
        },
        turns: options.turns + options.latencyRequests + options.warmup,
      },
      errors: latency.errors + load.errors + again.errors + floorLoad.errors + bareLoad.errors,
      latencyRequests: options.latencyRequests + options.warmup,
    };
  } finally {
    floor.kill();
    bare.kill();
    for (const child of children) await child.stop();
    await model.close();
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  }
}

const STREAM_BODY = { ...BODY, stream: true };
/** A chunk that carries text: a delta with non-empty content (not the role-only first chunk). */
const HAS_TEXT = (text: string) => /"content":"[^"]/.test(text);

/**
 * Time to first token, direct and through the gateway's `/v1` streaming, interleaved; a quarter
 * of the latency requests (the stand-in model streams at once, so what is left is the path).
 */
async function measureTtft(model: FakeOpenAI, gw: GatewayChild, options: CoreOptions) {
  const direct = new HttpClient(model.baseUrl.replace(/\/v1$/, ""));
  const through = new HttpClient(gw.baseUrl, gw.authHeaders());
  const samples = { direct: [] as number[], gateway: [] as number[] };
  const count = Math.ceil(options.latencyRequests / 4);
  try {
    for (let i = 0; i < 50 + count; i += 1) {
      const a = await direct.postStream(PATH, STREAM_BODY, HAS_TEXT);
      const b = await through.postStream(PATH, STREAM_BODY, HAS_TEXT);
      if (i < 50 || Number.isNaN(a.ms) || Number.isNaN(b.ms)) continue;
      samples.direct.push(a.ms);
      samples.gateway.push(b.ms);
    }
  } finally {
    direct.close();
    through.close();
  }
  const gateway = median(samples.gateway);
  const direct50 = median(samples.direct);
  return { gateway, direct: direct50, added: gateway - direct50 };
}

/** RSS 0.5 s after a load ended, and again SETTLE_S after it. */
async function rssAfterLoad(read: () => number): Promise<{ after: number; settled: number }> {
  await sleep(500);
  const after = read();
  await sleep(SETTLE_S * 1000 - 500);
  return { after, settled: read() };
}

/**
 * Interleaves direct, through-the-gateway and through-the-floor requests so drift in machine
 * load hits all three alike.
 */
async function measureLatency(
  model: FakeOpenAI,
  gw: GatewayChild,
  floor: FloorChild,
  bare: FloorChild,
  options: CoreOptions,
) {
  const direct = new HttpClient(model.baseUrl.replace(/\/v1$/, ""));
  const through = new HttpClient(gw.baseUrl, gw.authHeaders());
  const viaFloor = new HttpClient(floor.baseUrl);
  const viaBare = new HttpClient(bare.baseUrl);
  const samples = {
    gateway: [] as number[],
    direct: [] as number[],
    floor: [] as number[],
    bare: [] as number[],
  };
  let errors = 0;
  try {
    for (let i = 0; i < options.warmup + options.latencyRequests; i += 1) {
      const a = await direct.postJson(PATH, BODY);
      const b = await through.postJson(PATH, BODY);
      const c = await viaFloor.postJson(PATH, BODY);
      const e = await viaBare.postJson(PATH, BODY);
      if (a.status !== 200 || b.status !== 200 || c.status !== 200 || e.status !== 200) errors += 1;
      if (i < options.warmup) continue;
      samples.direct.push(a.ms);
      samples.gateway.push(b.ms);
      samples.floor.push(c.ms);
      samples.bare.push(e.ms);
    }
  } finally {
    direct.close();
    through.close();
    viaFloor.close();
    viaBare.close();
  }
  const tail = (values: number[]) => {
    values.sort((x, y) => x - y);
    return { p50: percentile(values, 50), p99: percentile(values, 99), max: values.at(-1)! };
  };
  const g = tail(samples.gateway);
  const d = tail(samples.direct);
  const f = tail(samples.floor);
  const bareTail = tail(samples.bare);
  return {
    gateway: g,
    direct: d,
    floor: f,
    bare: bareTail,
    added: { p50: g.p50 - d.p50, p99: g.p99 - d.p99 },
    errors,
  };
}

/** `sessions` clients, each looping turns on its own session, until `turns` turns are done. */
async function concurrentTurns(
  baseUrl: string,
  headers: Record<string, string>,
  options: CoreOptions,
) {
  const client = new HttpClient(baseUrl, headers);
  const perSession = Math.ceil(options.turns / options.sessions);
  const done: number[] = [];
  let errors = 0;
  const started = performance.now();
  const loop = async () => {
    let sessionId: string | undefined;
    for (let i = 0; i < perSession; i += 1) {
      const headers: Record<string, string> = sessionId ? { "x-session-id": sessionId } : {};
      const res = await client.postJson(PATH, BODY, headers);
      if (res.status !== 200) errors += 1;
      sessionId ??= res.headers["x-session-id"] as string | undefined;
      done.push(performance.now());
    }
  };
  try {
    await Promise.all(Array.from({ length: options.sessions }, loop));
  } finally {
    client.close();
  }
  done.sort((a, b) => a - b);
  const window = Math.min(options.throughputTurns, done.length);
  return {
    turnsPerSecond: window / ((done[window - 1]! - started) / 1000),
    overall: done.length / ((done[done.length - 1]! - started) / 1000),
    errors,
  };
}
