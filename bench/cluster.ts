/**
 * Several gateways on one Postgres (issue 20), all on this machine, so the figures show what
 * sharing costs rather than how it scales:
 * - turns/s through the OpenAI-compatible API with 1, 2 and 3 gateway processes on one database,
 *   each API session kept on one gateway (as a load balancer with affinity would), the instant
 *   stand-in model answering;
 * - takeover time: a gateway SIGKILLed while its turns run a tool, until a survivor has finished
 *   every interrupted turn (bounded below by the lease TTL: the lease must run out first, and the
 *   survivors sweep once per TTL).
 * - restart time: ONE gateway (its default instance id, the shipped lease TTL) SIGKILLed while its
 *   turns run a tool and started again at once in the same home, as a service manager would,
 *   until it has finished every interrupted turn (issue 43: it proves its predecessor gone and
 *   takes its leases over at start instead of waiting out the TTL).
 * The database is KEEL_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test), in a schema
 * of its own, dropped at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { type FakeOpenAI, startFakeOpenAI } from "../test/fakes/openai-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../test/helpers/store-harness.js";
import { GatewayChild } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";

const PATH = "/v1/chat/completions";

export interface ClusterThroughputResult {
  instances: number;
  sessions: number;
  turns: number;
  turnsPerSecond: number;
  errors: number;
}

export interface TakeoverResult {
  leaseTtlSeconds: number;
  interrupted: number;
  /** SIGKILL to the first interrupted turn finished by the survivor, ms. */
  firstMs: number;
  /** SIGKILL to the last one finished, ms. */
  allMs: number;
}

/** Gateways started on one fresh schema; `close()` kills them and drops it. */
async function startCluster(
  model: FakeOpenAI,
  count: number,
  env: Record<string, string> = {},
): Promise<{ gateways: GatewayChild[]; schema: string; close(): Promise<void> }> {
  const schema = await createTestSchema();
  const url = `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`;
  const homes: string[] = [];
  const gateways: GatewayChild[] = [];
  const close = async () => {
    for (const g of gateways) await g.kill();
    await schema.drop();
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  };
  try {
    // One after the other: the first applies the migrations.
    for (let i = 0; i < count; i += 1) {
      const home = mkdtempSync(join(tmpdir(), "keel-bench-cluster-"));
      homes.push(home);
      const gateway = GatewayChild.spawn({
        home,
        port: await freePort(),
        env: {
          OPENAI_BASE_URL: model.baseUrl,
          KEEL_MODEL: "bench-model",
          KEEL_DATABASE_URL: url,
          KEEL_INSTANCE_ID: `bench-${i + 1}`,
          ...env,
        },
        outputFile: join(home, "bench-output.log"),
      });
      gateways.push(gateway);
      await gateway.waitReady(20, 60_000);
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { gateways, schema: schema.schema, close };
}

/**
 * `sessions` clients, session i on gateway i mod n, each looping turns until `turns` turns are
 * done in all; the first `warmup` turns of each session are not timed.
 */
export async function runClusterThroughput(options: {
  instances: number;
  sessions: number;
  turns: number;
}): Promise<ClusterThroughputResult> {
  const model = await startFakeOpenAI();
  model.script({ text: "ok" });
  const cluster = await startCluster(model, options.instances);
  const clients = cluster.gateways.map((g) => new HttpClient(g.baseUrl, g.authHeaders()));
  const perSession = Math.ceil(options.turns / options.sessions);
  const body = { model: "bench-model", messages: [{ role: "user", content: "hello" }] };
  let errors = 0;
  try {
    // Each session's first turn creates it; timing starts once every session exists.
    const ids = await Promise.all(
      Array.from({ length: options.sessions }, async (_, i) => {
        const res = await clients[i % clients.length]!.postJson(PATH, body);
        if (res.status !== 200) errors += 1;
        return res.headers["x-session-id"] as string;
      }),
    );
    const started = performance.now();
    await Promise.all(
      ids.map(async (id, i) => {
        const client = clients[i % clients.length]!;
        for (let t = 0; t < perSession; t += 1) {
          const res = await client.postJson(PATH, body, { "x-session-id": id });
          if (res.status !== 200) errors += 1;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const turns = perSession * options.sessions;
    return {
      instances: options.instances,
      sessions: options.sessions,
      turns,
      turnsPerSecond: turns / seconds,
      errors,
    };
  } finally {
    for (const c of clients) c.close();
    await cluster.close();
    await model.close();
  }
}

/**
 * Two gateways; `interrupted` sessions on the first each run a long tool; the first is SIGKILLed
 * once every tool has started; timed until the survivor has finished each resumed turn.
 */
export async function runTakeover(options: {
  leaseTtlSeconds: number;
  interrupted: number;
}): Promise<TakeoverResult> {
  const model = await startFakeOpenAI();
  const cluster = await startCluster(model, 2, { KEEL_LEASE_TTL: String(options.leaseTtlSeconds) });
  const [victim] = cluster.gateways;
  const client = new HttpClient(victim!.baseUrl, victim!.authHeaders());
  const q = (sql: string) => adminQuery(`SET search_path TO ${cluster.schema}; ${sql}`);
  try {
    const body = { model: "bench-model", messages: [{ role: "user", content: "run: sleep 60" }] };
    const requests = Array.from({ length: options.interrupted }, () =>
      client.postJson(PATH, body).catch(() => null),
    );
    await waitUntil(
      async () =>
        Number((await q("SELECT count(*) AS n FROM tool_calls WHERE state = 'started'"))[0]!.n) ===
        options.interrupted,
      30_000,
      "every tool call started",
    );
    const killedAt = performance.now();
    await victim!.kill();
    await Promise.all(requests);
    const finished: number[] = [];
    const deadline = killedAt + 20 * options.leaseTtlSeconds * 1000 + 30_000;
    while (finished.length < options.interrupted) {
      if (performance.now() > deadline) throw new Error("the survivor did not finish every turn");
      const n = Number(
        (await q("SELECT count(*) AS n FROM turns WHERE inbox_id IS NULL AND state = 'done'"))[0]!
          .n,
      );
      while (finished.length < n) finished.push(performance.now() - killedAt);
      await sleep(20);
    }
    return {
      leaseTtlSeconds: options.leaseTtlSeconds,
      interrupted: options.interrupted,
      firstMs: finished[0]!,
      allMs: finished.at(-1)!,
    };
  } finally {
    client.close();
    await cluster.close();
    await model.close();
  }
}

export interface RestartResult {
  interrupted: number;
  /** SIGKILL to the restarted gateway answering /readyz, ms. */
  readyMs: number;
  /** SIGKILL to the first interrupted turn finished by the restarted gateway, ms. */
  firstMs: number;
  /** SIGKILL to the last one finished, ms. */
  allMs: number;
}

/**
 * One gateway, on the shipped defaults but for the store; `interrupted` API sessions each run a
 * long tool; SIGKILLed once every tool has started and started again at once in its home; timed
 * until the new process has finished each resumed turn.
 */
export async function runRestart(options: { interrupted: number }): Promise<RestartResult> {
  const model = await startFakeOpenAI();
  const schema = await createTestSchema();
  const home = mkdtempSync(join(tmpdir(), "keel-bench-restart-"));
  const env = {
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "bench-model",
    KEEL_DATABASE_URL: `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`,
  };
  const gateways: GatewayChild[] = [];
  const start = async () => {
    const gateway = GatewayChild.spawn({
      home,
      port: await freePort(),
      env,
      outputFile: join(home, `bench-output-${gateways.length}.log`),
    });
    gateways.push(gateway);
    await gateway.waitReady(20, 60_000);
    return gateway;
  };
  const q = (sql: string) => adminQuery(`SET search_path TO ${schema.schema}; ${sql}`);
  const first = await start();
  const client = new HttpClient(first.baseUrl, first.authHeaders());
  try {
    const body = { model: "bench-model", messages: [{ role: "user", content: "run: sleep 60" }] };
    const requests = Array.from({ length: options.interrupted }, () =>
      client.postJson(PATH, body).catch(() => null),
    );
    await waitUntil(
      async () =>
        Number((await q("SELECT count(*) AS n FROM tool_calls WHERE state = 'started'"))[0]!.n) ===
        options.interrupted,
      30_000,
      "every tool call started",
    );
    const killedAt = performance.now();
    await first.kill();
    await Promise.all(requests);
    await start();
    const readyMs = performance.now() - killedAt;
    const finished: number[] = [];
    const deadline = killedAt + 120_000;
    while (finished.length < options.interrupted) {
      if (performance.now() > deadline) throw new Error("the restart did not finish every turn");
      const n = Number(
        (await q("SELECT count(*) AS n FROM turns WHERE inbox_id IS NULL AND state = 'done'"))[0]!
          .n,
      );
      while (finished.length < n) finished.push(performance.now() - killedAt);
      await sleep(20);
    }
    return {
      interrupted: options.interrupted,
      readyMs,
      firstMs: finished[0]!,
      allMs: finished.at(-1)!,
    };
  } finally {
    client.close();
    for (const g of gateways) await g.kill();
    await schema.drop();
    await model.close();
    rmSync(home, { recursive: true, force: true });
  }
}

async function waitUntil(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await sleep(20);
  }
}
