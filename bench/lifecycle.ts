/**
 * Lifecycle figures of issue 3, on the BUILT gateway in a child process: time from SIGTERM to
 * exit with turns in flight (each session in a slow model call, default drain timeout 0), and
 * time from start to "every interrupted session resumed" after a SIGKILL left sessions
 * resume-pending.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { openSqliteDatabase } from "../src/sessions/sqlite-database.js";
import { type FakeOpenAI, startFakeOpenAI } from "../test/fakes/openai-server.js";
import { freePort } from "../test/helpers/gateway-process.js";
import { GatewayChild } from "./gateway-child.js";
import { HttpClient } from "./http-client.js";

export interface StopResult {
  inFlight: number;
  /** SIGTERM to the child's exit. */
  ms: number;
  exitCode: number | null;
}

export interface ResumeResult {
  sessions: number;
  /** Spawn of the second gateway to its first 200 on /readyz. */
  readyMs: number;
  /** Spawn of the second gateway to the last resumed answer stored. */
  allResumedMs: number;
  /** max_concurrent_turns of the resuming gateway. */
  concurrency: number;
}

const SLOW = "slow: 30000 first answer";
const RESUMED = "resumed-answer";

interface Rig {
  model: FakeOpenAI;
  home: string;
  spawn(): Promise<GatewayChild>;
  close(): Promise<void>;
}

async function rig(maxConcurrentTurns: number): Promise<Rig> {
  const model = await startFakeOpenAI();
  const home = mkdtempSync(join(tmpdir(), "keel-bench-life-"));
  writeFileSync(
    join(home, "config.yaml"),
    `agent:\n  max_concurrent_turns: ${maxConcurrentTurns}\n`,
  );
  const port = await freePort();
  const children: GatewayChild[] = [];
  return {
    model,
    home,
    async spawn() {
      const child = GatewayChild.spawn({
        home,
        port,
        env: { OPENAI_BASE_URL: model.baseUrl, KEEL_MODEL: "bench-model" },
        outputFile: join(home, "bench-output.log"),
      });
      children.push(child);
      return child;
    },
    async close() {
      for (const child of children) await child.kill();
      await model.close();
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** Starts `count` slow turns (stateless API requests) and waits until each is in a model call. */
async function slowTurns(model: FakeOpenAI, gw: GatewayChild, count: number): Promise<void> {
  const client = new HttpClient(gw.baseUrl, gw.authHeaders());
  const before = model.requests.length;
  for (let i = 0; i < count; i += 1) {
    const body = { model: "bench-model", messages: [{ role: "user", content: `${SLOW} ${i}` }] };
    // These end when the gateway stops or dies: only their start matters.
    client.postJson("/v1/chat/completions", body).catch(() => {});
  }
  const deadline = performance.now() + 30_000;
  while (model.requests.length - before < count) {
    if (performance.now() > deadline)
      throw new Error(`only ${model.requests.length - before} of ${count} turns reached the model`);
    await sleep(5);
  }
}

/** SIGTERM with `inFlight` turns in slow model calls; the gateway's drain timeout is the default. */
export async function runStopInFlight(inFlight: number): Promise<StopResult> {
  const r = await rig(inFlight);
  try {
    const gw = await r.spawn();
    await gw.waitReady();
    await slowTurns(r.model, gw, inFlight);
    const sent = performance.now();
    gw.signal("SIGTERM");
    const exit = await gw.exited;
    return { inFlight, ms: exit.at - sent, exitCode: exit.code };
  } finally {
    await r.close();
  }
}

/**
 * Seeds `sessions` resume-pending sessions (slow turns, then SIGKILL), makes the model answer at
 * once, starts the gateway again and times it until every session has its resumed answer.
 */
export async function runResume(sessions: number, concurrency: number): Promise<ResumeResult> {
  const r = await rig(sessions);
  try {
    const seed = await r.spawn();
    await seed.waitReady();
    await slowTurns(r.model, seed, sessions);
    await seed.kill();
    writeFileSync(join(r.home, "config.yaml"), `agent:\n  max_concurrent_turns: ${concurrency}\n`);
    r.model.script(() => ({ text: RESUMED }));
    const db = openSqliteDatabase(join(r.home, "state.db"), {
      readonly: true,
      fileMustExist: true,
    });
    const resumedCount = db.prepare(
      "SELECT COUNT(DISTINCT session_id) AS n FROM messages WHERE role = 'assistant' AND body LIKE ?",
    );
    try {
      const gw = await r.spawn();
      const ready = gw.waitReady(5);
      const deadline = performance.now() + 60_000;
      for (;;) {
        const { n } = resumedCount.get(`%${RESUMED}%`) as { n: number };
        if (n >= sessions) break;
        if (performance.now() > deadline)
          throw new Error(`only ${n} of ${sessions} resumed in 60 s`);
        await sleep(5);
      }
      const allResumedMs = performance.now() - gw.spawnedAt;
      return { sessions, readyMs: await ready, allResumedMs, concurrency };
    } finally {
      db.close();
    }
  } finally {
    await r.close();
  }
}
