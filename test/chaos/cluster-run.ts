/**
 * The chaos run with several gateways on one Postgres database (`npm run chaos -- --instances 3`):
 * the same conversations, chaos model, checks and figures line as chaos-run.ts, but N gateway
 * processes (each with its own home, one shared schema) run at once. Every cycle SIGKILLs one of
 * them — the Telegram poller's holder more often than not, as it receives and runs the turns —
 * at a random moment, and starts it again under the same instance id after a random pause; the
 * others take the poller, the cut-off turns and the queued messages over meanwhile. At the end
 * every gateway stays up until every message is answered, and the history is checked.
 *
 * Kills are random SIGKILLs only: the named crash points (chaos-run.ts) stop one process at a
 * step of its own turn, and a turn runs where the poller is, so they are left to the single-gateway
 * run.
 */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { startFakeOpenAI } from "../fakes/openai-server.js";
import { startFakeTelegram } from "../fakes/telegram-server.js";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import { createChaosModel, READ_FILE_NAME, READ_FILE_TEXT } from "./chaos-model.js";
import { type ChaosResult, drive, figuresOf, isAnswered, passes, until } from "./chaos-run.js";
import { telegramChats } from "./chats.js";
import { type CutOffTurn, checkHistory, type SentMessage } from "./check-history.js";
import { BUSY_MODES, planConversations } from "./plan.js";
import { createRng } from "./prng.js";
import { CHAOS_CONTEXT_LENGTH, DEFAULT_BREAKER_WINDOW_SECONDS } from "./rig.js";

const TOKEN = "123456:chaos-cluster-token";

export interface ClusterChaosOptions {
  turns: number;
  seed: number;
  /** Gateway processes on the database (one: a single gateway killed and restarted). */
  instances: number;
  conversations?: number;
  /** Bound of the kill phase; the settle phase adds at most `settleMs`. */
  timeLimitMs?: number;
  settleMs?: number;
  /**
   * `cluster.lease_ttl` (s) of every gateway; default 2 (short, so takeovers are frequent); null
   * leaves the shipped default.
   */
  leaseTtlSeconds?: number | null;
  /** Longest pause before a killed gateway starts again, ms; default 3000. */
  maxDownMs?: number;
  /**
   * Each gateway keeps its default instance id (host-pid-random, a new one at every start, as
   * shipped) instead of a fixed `chaos-<i>` kept across its restarts.
   */
  defaultInstanceIds?: boolean;
  /** How long each gateway runs before the next kill, ms; default 300 to 4000. */
  killGapMs?: [number, number];
  breakerWindowSeconds?: number;
  onProgress?: (line: string) => void;
}

export async function runClusterChaos(options: ClusterChaosOptions): Promise<ChaosResult> {
  const rng = createRng(options.seed ^ 0x2f6b1c2);
  const count = options.conversations ?? Math.min(8, Math.max(2, Math.ceil(options.turns / 6)));
  const conversations = planConversations(createRng(options.seed), options.turns, count);
  const dir = mkdtempSync(join(tmpdir(), "keel-chaos-cluster-"));
  // Shared by the gateways' commands, which run in the sandbox (the default): its folder is the
  // one path each config adds to the sandbox's writable roots.
  const ledgerDir = join(dir, "ledger");
  mkdirSync(ledgerDir);
  const ledger = join(ledgerDir, "ledger.txt");
  writeFileSync(ledger, "");
  const telegram = await startFakeTelegram({ token: TOKEN });
  const model = await startFakeOpenAI({ contextLength: CHAOS_CONTEXT_LENGTH });
  const chaos = createChaosModel({ ledger, seed: options.seed });
  model.script(chaos.script);
  const schema = await createTestSchema();
  const q = (sql: string) => adminQuery(`SET search_path TO ${schema.schema}; ${sql}`);
  const window = options.breakerWindowSeconds;
  const env = {
    OPENAI_BASE_URL: model.baseUrl,
    KEEL_MODEL: "fake-model",
    TELEGRAM_BOT_TOKEN: TOKEN,
    TELEGRAM_API_ROOT: telegram.apiRoot,
    TELEGRAM_ALLOWED_USERS: conversations.map((c) => c.chatId).join(","),
    KEEL_HTTP_PORT: "0",
    KEEL_API_ENABLED: "false",
    KEEL_WEBCHAT_ENABLED: "false",
    KEEL_LOG_LEVEL: "info",
    KEEL_DATABASE_URL: `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`,
    ...(options.leaseTtlSeconds !== null && {
      KEEL_LEASE_TTL: String(options.leaseTtlSeconds ?? 2),
    }),
  };
  const homes = Array.from({ length: options.instances }, (_, i) => {
    const home = join(dir, `home-${i}`);
    mkdirSync(join(home, "workspace"), { recursive: true });
    writeFileSync(join(home, "workspace", READ_FILE_NAME), `${READ_FILE_TEXT}\n`);
    return home;
  });
  // The id each slot's gateway runs under now (a fixed one, or read back from the registry).
  const ids = Array.from({ length: options.instances }, (_, i) => `chaos-${i}`);
  const instanceId = (i: number) => ids[i]!;
  const spawn = async (i: number): Promise<GatewayProcess> => {
    const agent = window === undefined ? "" : `agent:\n  resume_breaker_window: ${window}\n`;
    writeFileSync(
      join(homes[i]!, "config.yaml"),
      `${agent}display:\n  busy_input_mode: ${rng.pick(BUSY_MODES)}\n` +
        `tools:\n  sandbox_writable: [${JSON.stringify(ledgerDir)}]\n`,
    );
    const gateway = await startGatewayProcess({
      home: homes[i]!,
      env: options.defaultInstanceIds ? env : { ...env, KEEL_INSTANCE_ID: instanceId(i) },
      inheritEnv: false,
      outputFile: join(dir, `gateway-${i}.out.log`),
    });
    await gateway.waitForRunning(30_000);
    if (options.defaultInstanceIds) {
      const [row] = await q(`SELECT id FROM instances WHERE pid = ${gateway.pid}`);
      if (row) ids[i] = String(row.id);
    }
    return gateway;
  };

  const gateways: (GatewayProcess | null)[] = [];
  const state = {
    rig: {
      chats: telegramChats(
        telegram,
        TOKEN,
        conversations.map((c) => c.chatId),
      ),
    },
    sent: [] as SentMessage[],
    stopping: false,
    stepTimeoutMs: (window ?? DEFAULT_BREAKER_WINDOW_SECONDS) * 1000 + 150_000,
  };
  const cutOff: CutOffTurn[] = [];
  let keepSchema = false;
  let kills = 0;
  let driversDone = false;
  const progress = setInterval(() => {
    const answered = state.sent.filter((m) => isAnswered(state.rig, m.chatId, m.id)).length;
    options.onProgress?.(`chaos: kills=${kills} sent=${state.sent.length} answered=${answered}`);
  }, 10_000);
  try {
    for (let i = 0; i < options.instances; i++) gateways.push(await spawn(i));
    const drivers = Promise.all(conversations.map((c) => drive(state, c))).then(() => {
      driversDone = true;
    });
    const deadline = Date.now() + (options.timeLimitMs ?? 10 * 60_000);
    while (!driversDone && Date.now() < deadline) {
      const [minGap, maxGap] = options.killGapMs ?? [300, 4000];
      await sleep(rng.int(minGap, maxGap));
      const victim = await chooseVictim(q, rng, options.instances, instanceId);
      gateways[victim]!.kill("SIGKILL");
      await gateways[victim]!.waitForExit();
      gateways[victim] = null;
      kills += 1;
      cutOff.push(...(await cutOffBy(q, instanceId(victim))));
      await sleep(rng.int(0, options.maxDownMs ?? 3000));
      gateways[victim] = await spawn(victim);
    }
    // Settle: every gateway up until every message is answered (bounded).
    await until(
      () => driversDone && state.sent.every((m) => isAnswered(state.rig, m.chatId, m.id)),
      options.settleMs ?? (window ?? DEFAULT_BREAKER_WINDOW_SECONDS) * 1000 + 90_000,
    );
    await sleep(1000);
    state.stopping = true;
    await Promise.all(gateways.map((g) => g?.terminate()));
    await drivers;
    const turns = await q("SELECT id, session_key, state, started_at FROM turns");
    const chats = [...new Set(state.sent.map((m) => m.chatId))];
    const botEntries = chats.flatMap((chatId) =>
      telegram
        .chatLog(chatId)
        .filter((e) => e.from === "bot")
        .map((e) => ({ ...e, chatId })),
    );
    const verdict = checkHistory({
      sent: state.sent,
      botMessages: botEntries.map((e) => ({ chatId: e.chatId, text: e.text })),
      ledger: readFileSync(ledger, "utf8")
        .split("\n")
        .filter((l) => l.trim() !== ""),
      cutOff,
      turns: turns.map((t) => ({
        id: Number(t.id),
        sessionKey: String(t.session_key),
        state: String(t.state),
        startedAt: Number(t.started_at),
      })),
      sessionKeyOf: (chatId) => `agent:main:telegram:dm:${chatId}`,
    });
    const logs = homes.map((home) => {
      try {
        return readFileSync(join(home, "logs", "gateway.log"), "utf8");
      } catch {
        return "";
      }
    });
    const figures = figuresOf({ sent: state.sent.length, kills, verdict, botEntries, logs });
    const ok = passes(figures);
    const chatLogs = Object.fromEntries(chats.map((chatId) => [chatId, telegram.chatLog(chatId)]));
    const report = { seed: options.seed, instances: options.instances, figures, verdict, chatLogs };
    writeFileSync(join(dir, "chaos-report.json"), `${JSON.stringify(report, null, 2)}\n`);
    keepSchema = !ok;
    return { figures, verdict, crashPointsHit: {}, dir, ok };
  } finally {
    clearInterval(progress);
    state.stopping = true;
    await Promise.all(gateways.map((g) => g?.stop()));
    await telegram.close();
    await model.close();
    // A failed run keeps its database beside its folder, for the post-mortem.
    if (keepSchema) options.onProgress?.(`chaos: database kept in schema ${schema.schema}`);
    else await schema.drop();
  }
}

/** The poller's holder more often than not (it receives and runs the turns), else any gateway. */
async function chooseVictim(
  q: (sql: string) => Promise<Record<string, unknown>[]>,
  rng: ReturnType<typeof createRng>,
  instances: number,
  instanceId: (i: number) => string,
): Promise<number> {
  const all = Array.from({ length: instances }, (_, i) => i);
  if (rng.chance(0.6)) {
    const rows = await q(
      `SELECT owner FROM session_leases WHERE session_key LIKE 'poller:telegram:%'
         AND expires_at > (extract(epoch FROM clock_timestamp()) * 1000)::bigint`,
    );
    const holder = all.find((i) => rows[0]?.owner === instanceId(i));
    if (holder !== undefined) return holder;
  }
  return rng.pick(all);
}

/** The turns the killed gateway was running (it held their sessions' leases). */
async function cutOffBy(
  q: (sql: string) => Promise<Record<string, unknown>[]>,
  owner: string,
): Promise<CutOffTurn[]> {
  const killedAt = Date.now();
  const rows = await q(
    `SELECT t.id, t.session_key FROM turns t
       JOIN session_leases l ON l.session_key = t.session_key
       WHERE t.state = 'running' AND (l.owner = '${owner}' OR l.owner = '${owner}:takeover')`,
  );
  return rows.map((r) => ({
    turnId: Number(r.id),
    sessionKey: String(r.session_key),
    killedAt,
  }));
}
