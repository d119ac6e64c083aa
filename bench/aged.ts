/**
 * `npm run bench -- --aged`: the same gateway on an empty store and on an aged one (bench/aged-seed.ts:
 * `--aged-sessions` sessions of `--aged-messages` / sessions messages each, written through the
 * store's API), SQLite and Postgres (`--aged-stores sqlite,postgres`). For each: spawn to
 * `/readyz`, idle RSS, `/api/status`, `/api/sessions` (one page, the dashboard's 100), the
 * dashboard's page load (its HTML and the three reads its script makes), and turn latency through
 * `/v1`; then, on the aged store, start-up with `--open-turns` turns a SIGKILL left running:
 * spawn to `/readyz` (the recovery reading) and to every one of them answered.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { PgStore } from "../src/sessions/pg-store.js";
import { SqliteStore } from "../src/sessions/sqlite-store.js";
import type { Store } from "../src/sessions/store.js";
import { type FakeOpenAI, startFakeOpenAI } from "../test/fakes/openai-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { testDatabase } from "../test/helpers/store-harness.js";
import { SeedClock, seedAgedStore, seedOpenTurns } from "./aged-seed.js";
import { GatewayChild } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";
import { median, percentile } from "./stats.js";

export type StoreKind = "sqlite" | "postgres";

export interface AgedOptions {
  store: StoreKind;
  sessions: number;
  messages: number;
  /** Requests per read figure and turns for the latency figure. */
  requests: number;
  openTurns: number;
  coldStarts: number;
  progress?: (line: string) => void;
}

export interface Tail {
  p50: number;
  p90: number;
  p99: number;
}

export interface StoreFigures {
  readyMs: number;
  /** Settled (SETTLE_MS after ready). */
  idleRssMb: number;
  statusMs: Tail;
  sessionsMs: Tail;
  dashboardMs: Tail;
  turnMs: Tail;
  errors: number;
}

export interface AgedResult {
  store: StoreKind;
  sessions: number;
  messages: number;
  seedSeconds: number;
  empty: StoreFigures;
  aged: StoreFigures;
  recovery: { openTurns: number; readyMs: number; allAnsweredMs: number };
}

const SETTLE_MS = 12_000;
const TURN = { model: "bench-model", messages: [{ role: "user", content: "hello" }] };
/** No fsync while seeding: the seed is not what is measured, and it is thrown away after. */
const noFsync = (_fd: number, done: (err: NodeJS.ErrnoException | null) => void) => done(null);

interface Target {
  /** What the gateway child is given to find its store. */
  env: Record<string, string>;
  open(forSeeding: boolean, clock?: SeedClock): Promise<Store>;
  drop(): Promise<void>;
}

/** Databases made so far in this process (each target's name is its own). */
let databases = 0;

async function makeTarget(kind: StoreKind, home: string): Promise<Target> {
  if (kind === "sqlite") {
    const path = join(home, "state.db");
    return {
      env: {},
      open: async (_seeding, clock) =>
        new SqliteStore(path, { fsync: noFsync, ...(clock && { now: clock.now }) }),
      drop: async () => {},
    };
  }
  // A database of the bench's own (not a schema in the shared test database): two million rows
  // and their autovacuum stay out of what other work on the server reads.
  databases += 1;
  const db = testDatabase(`keel_bench_aged_${databases}`);
  await db.create();
  const url = (extra = "") => (extra ? `${db.url}?options=${encodeURIComponent(extra)}` : db.url);
  return {
    env: { KEEL_DATABASE_URL: url() },
    // Seeding need not wait for the disk either.
    open: (forSeeding, clock) =>
      PgStore.open(url(forSeeding ? "-c synchronous_commit=off" : ""), {
        ...(clock && { now: clock.now }),
      }),
    drop: () => db.drop(),
  };
}

function tail(values: number[]): Tail {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
  };
}

/** `requests` sequential GETs of each path in `paths` (one sample = all of them). */
async function timeReads(client: HttpClient, paths: string[], requests: number) {
  const samples: number[] = [];
  let errors = 0;
  for (let i = 0; i < requests + 20; i += 1) {
    const started = performance.now();
    for (const path of paths) {
      const res = await client.get(path);
      if (res.status !== 200) errors += 1;
    }
    if (i >= 20) samples.push(performance.now() - started);
  }
  return { tail: tail(samples), errors };
}

async function measureGateway(
  model: FakeOpenAI,
  home: string,
  target: Target,
  options: AgedOptions,
): Promise<StoreFigures> {
  const env = { ...target.env, OPENAI_BASE_URL: model.baseUrl, KEEL_MODEL: "bench-model" };
  const ready: number[] = [];
  let gateway: GatewayChild | null = null;
  try {
    for (let i = 0; i < options.coldStarts; i += 1) {
      gateway = GatewayChild.spawn({
        home,
        port: await freePort(),
        env,
        outputFile: join(home, "bench-output.log"),
      });
      ready.push(await gateway.waitReady(5, 120_000));
      if (i < options.coldStarts - 1) await gateway.stop();
    }
    const gw = gateway!;
    await sleep(SETTLE_MS);
    const idleRssMb = gw.rssMb();
    const client = new HttpClient(gw.baseUrl, gw.authHeaders());
    try {
      const status = await timeReads(client, ["/api/status"], options.requests);
      const sessions = await timeReads(client, ["/api/sessions?limit=100"], options.requests);
      const dashboard = await timeReads(
        client,
        ["/dashboard", "/api/status", "/api/sessions", "/api/approvals"],
        options.requests,
      );
      const turns: number[] = [];
      let errors = status.errors + sessions.errors + dashboard.errors;
      for (let i = 0; i < options.requests + 20; i += 1) {
        const res = await client.postJson("/v1/chat/completions", TURN);
        if (res.status !== 200) errors += 1;
        if (i >= 20) turns.push(res.ms);
      }
      return {
        readyMs: median(ready),
        idleRssMb,
        statusMs: status.tail,
        sessionsMs: sessions.tail,
        dashboardMs: dashboard.tail,
        turnMs: tail(turns),
        errors,
      };
    } finally {
      client.close();
    }
  } finally {
    await gateway?.stop();
  }
}

/**
 * `openTurns` turns left running in the aged store; the time from spawn to ready and to every one
 * of them answered (each resumed turn is one model request).
 */
async function measureRecovery(
  model: FakeOpenAI,
  home: string,
  target: Target,
  options: AgedOptions,
) {
  const store = await target.open(true);
  await seedOpenTurns(store, options.openTurns, options.sessions);
  await store.close();
  const before = model.requests.length;
  const gateway = GatewayChild.spawn({
    home,
    port: await freePort(),
    env: { ...target.env, OPENAI_BASE_URL: model.baseUrl, KEEL_MODEL: "bench-model" },
    outputFile: join(home, "bench-recovery.log"),
  });
  try {
    const readyMs = await gateway.waitReady(5, 120_000);
    const deadline = performance.now() + 300_000;
    while (model.requests.length - before < options.openTurns && performance.now() < deadline) {
      await sleep(20);
    }
    const allAnsweredMs =
      model.requests.length - before >= options.openTurns
        ? performance.now() - gateway.spawnedAt
        : Number.NaN;
    return { openTurns: options.openTurns, readyMs, allAnsweredMs };
  } finally {
    await gateway.stop();
  }
}

export async function runAged(options: AgedOptions): Promise<AgedResult> {
  const model = await startFakeOpenAI();
  model.script({ text: "ok" });
  const homes: string[] = [];
  const targets: Target[] = [];
  const newHome = async () => {
    const home = mkdtempSync(join(tmpdir(), "keel-bench-aged-"));
    homes.push(home);
    const target = await makeTarget(options.store, home);
    targets.push(target);
    return { home, target };
  };
  try {
    const empty = await newHome();
    options.progress?.(`${options.store}: empty store`);
    const emptyFigures = await measureGateway(model, empty.home, empty.target, options);
    const aged = await newHome();
    const clock = new SeedClock();
    const store = await aged.target.open(true, clock);
    const seedSeconds = await seedAgedStore(store, {
      clock,
      sessions: options.sessions,
      messagesPerSession: Math.max(2, Math.round(options.messages / options.sessions)),
      progress: (done) => options.progress?.(`${options.store}: seeded ${done} sessions`),
    });
    await store.close();
    options.progress?.(`${options.store}: aged store seeded in ${seedSeconds.toFixed(0)} s`);
    const agedFigures = await measureGateway(model, aged.home, aged.target, options);
    const recovery = await measureRecovery(model, aged.home, aged.target, options);
    return {
      store: options.store,
      sessions: options.sessions,
      messages: options.messages,
      seedSeconds,
      empty: emptyFigures,
      aged: agedFigures,
      recovery,
    };
  } finally {
    await model.close();
    for (const target of targets) await target.drop().catch(() => {});
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  }
}
