/**
 * One chaos run: the real gateway process under the fake Telegram server and the chaos model,
 * conversations driven in the background, the gateway SIGKILLed at every named crash point and
 * at random moments and restarted, then one clean start to let everything settle, and the whole
 * history checked (check-history.ts). Everything is bounded in time.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { GatewayProcess } from "../helpers/gateway-process.js";
import { answeredIds } from "./chaos-model.js";
import {
  type CutOffTurn,
  checkHistory,
  type SentMessage,
  type TurnRow,
  type Verdict,
} from "./check-history.js";
import { type Conversation, createEpisodes, type Episode, planConversations } from "./plan.js";
import { createRng } from "./prng.js";
import { createRig, type Rig } from "./rig.js";

export interface ChaosOptions {
  /** User messages to send in total. */
  turns: number;
  seed: number;
  /** Chats driven in parallel (default: one per six turns, 2 to 8). */
  conversations?: number;
  /** Bound of the kill phase; the settle phase adds at most `settleMs` (default 60 s). */
  timeLimitMs?: number;
  settleMs?: number;
  /** Work folder (default: a temporary folder). */
  dir?: string;
  /** Called with a progress line every few seconds. */
  onProgress?: (line: string) => void;
}

export interface ChaosFigures {
  turns: number;
  kills: number;
  lost: number;
  duplicate_tool_runs: number;
  unresumed: number;
  duplicate_replies: number;
}

export interface ChaosResult {
  figures: ChaosFigures;
  verdict: Verdict;
  /** Crash point name -> times it killed the gateway. */
  crashPointsHit: Record<string, number>;
  /** Where the gateway log, ledger, state.db and chaos-report.json are. */
  dir: string;
  ok: boolean;
}

/** The one line the harness prints. */
export function formatFigures(f: ChaosFigures): string {
  return `turns=${f.turns} kills=${f.kills} lost=${f.lost} duplicate_tool_runs=${f.duplicate_tool_runs} unresumed=${f.unresumed} duplicate_replies=${f.duplicate_replies}`;
}

const STEP_TIMEOUT_MS = 60_000;
const CRASH_POINT_WAIT_MS = 15_000;
const CALM_TIMEOUT_MS = 30_000;

interface RunState {
  rig: Rig;
  sent: SentMessage[];
  stopping: boolean;
  driversDone: boolean;
  kills: number;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const count = options.conversations ?? Math.min(8, Math.max(2, Math.ceil(options.turns / 6)));
  const conversations = planConversations(createRng(options.seed), options.turns, count);
  const rig = await createRig({
    chats: conversations.map((c) => c.chatId),
    seed: options.seed,
    dir: options.dir,
  });
  const state: RunState = { rig, sent: [], stopping: false, driversDone: false, kills: 0 };
  const drivers = Promise.all(conversations.map((c) => drive(state, c))).then(() => {
    state.driversDone = true;
  });
  const progress = setInterval(() => options.onProgress?.(progressLine(state)), 10_000);
  try {
    const kills = await killLoop(state, options);
    await settle(state, options.settleMs ?? 60_000);
    state.stopping = true;
    await drivers;
    return finish(state, options, kills);
  } finally {
    clearInterval(progress);
    state.stopping = true;
    await rig.close({ keepDir: true });
  }
}

function isAnswered(rig: Rig, chatId: number, id: string): boolean {
  return rig.telegram
    .chatLog(chatId)
    .some((e) => e.from === "bot" && answeredIds(e.text).includes(id));
}

/** Sends a conversation's steps; each waits (bounded) until its messages are answered. */
async function drive(state: RunState, conversation: Conversation): Promise<void> {
  const { rig } = state;
  for (const step of conversation.steps) {
    if (state.stopping) return;
    const stepStartedAt = Date.now();
    for (const [i, message] of step.messages.entries()) {
      if (i > 0) await sleep(step.burstGapMs);
      const sentAt = Date.now();
      state.sent.push({ id: message.id, chatId: conversation.chatId, sentAt, stepStartedAt });
      rig.telegram.sendUserMessage({
        chatId: conversation.chatId,
        text: `${message.id} ${message.kind}`,
      });
    }
    await until(
      () =>
        state.stopping || step.messages.every((m) => isAnswered(rig, conversation.chatId, m.id)),
      STEP_TIMEOUT_MS,
    );
    await sleep(step.pauseMs);
  }
}

async function until(
  predicate: () => boolean,
  timeoutMs: number,
  intervalMs = 50,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (predicate()) return true;
    await sleep(intervalMs);
  }
  return predicate();
}

interface KillRecord {
  kills: number;
  /** Kills after a calm run (see calmEpisode). */
  calmKills: number;
  cutOff: CutOffTurn[];
  crashPointsHit: Record<string, number>;
  cutOffToolCalls: Map<string, string>;
  unexpectedExits: number;
}

/** Starts and kills gateways until the conversations are done or the time limit is reached. */
async function killLoop(state: RunState, options: ChaosOptions): Promise<KillRecord> {
  const record: KillRecord = {
    kills: 0,
    calmKills: 0,
    cutOff: [],
    crashPointsHit: {},
    cutOffToolCalls: new Map(),
    unexpectedExits: 0,
  };
  const episodes = createEpisodes(createRng(options.seed ^ 0x5bd1e995));
  const deadline = Date.now() + (options.timeLimitMs ?? 10 * 60_000);
  let risky: number[] = [];
  while (!state.driversDone && Date.now() < deadline) {
    if (risky.length > 0) {
      await calmEpisode(state, risky);
      record.calmKills += 1;
    } else {
      const planned = episodes.next();
      const hit = await episode(state, planned, record);
      if (planned.crashPoint && !hit) episodes.missed(planned.crashPoint);
    }
    record.kills += 1;
    state.kills = record.kills;
    noteCutOff(state.rig, record);
    risky = chatsNearSuspension(state.rig);
  }
  state.stopping = Date.now() >= deadline;
  return record;
}

/** One planned episode: a crash point or a SIGKILL at a random moment; true when a crash point was hit. */
async function episode(state: RunState, planned: Episode, record: KillRecord): Promise<boolean> {
  const gateway = await state.rig.spawn({
    crashPoint: planned.crashPoint ?? undefined,
    busyMode: planned.busyMode,
  });
  const waitMs = planned.crashPoint ? CRASH_POINT_WAIT_MS : planned.killAfterMs;
  const died = await waitForDeath(state, gateway, waitMs);
  await gateway.stop();
  const hit = died && gateway.exitStatus?.signal === "SIGKILL" && planned.crashPoint !== null;
  if (hit) {
    const name = planned.crashPoint!.split(":")[0]!;
    record.crashPointsHit[name] = (record.crashPointsHit[name] ?? 0) + 1;
  } else if (died) record.unexpectedExits += 1;
  if (planned.downMs > 0) await sleep(planned.downMs);
  return hit;
}

/**
 * Three cut-offs in a row suspend a session (the lifecycle's restart-loop protection, tested
 * elsewhere): it would then never resume. So when a session has been cut off twice in a row,
 * the next gateway runs until that session's streak has ended (a turn finished `done`, which
 * resets its count) before it is killed. The record is read while the gateway runs (WAL).
 */
async function calmEpisode(state: RunState, chats: number[]): Promise<void> {
  const gateway = await state.rig.spawn({ busyMode: "interrupt" });
  await gateway.waitForRunning(20_000);
  const keys = chats.map((chatId) => state.rig.sessionKey(chatId));
  const streaksOver = () => {
    try {
      return state.rig.readDb((db) =>
        keys.every((key) => {
          const row = db.prepare("SELECT interrupt_count FROM sessions WHERE key = ?").get(key) as
            | { interrupt_count: number }
            | undefined;
          return (row?.interrupt_count ?? 0) === 0;
        }),
      );
    } catch {
      return false;
    }
  };
  await until(() => state.driversDone || streaksOver(), CALM_TIMEOUT_MS, 200);
  await gateway.stop();
}

/** Chats whose session will count two or more cut-offs in a row once recovery has run. */
function chatsNearSuspension(rig: Rig): number[] {
  try {
    const rows = rig.readDb(
      (db) =>
        db
          .prepare(
            `SELECT s.key, s.interrupt_count, s.resume_pending,
               EXISTS (SELECT 1 FROM turns t WHERE t.session_key = s.key AND t.state = 'running') AS running
             FROM sessions s`,
          )
          .all() as {
          key: string;
          interrupt_count: number;
          resume_pending: number;
          running: number;
        }[],
    );
    return (
      rows
        // A running turn cut off now counts once more at recovery, resumed turns included.
        .filter((r) => r.interrupt_count + (r.running ? 1 : 0) >= 2)
        .map((r) => Number(r.key.split(":").at(-1)))
        .filter((id) => Number.isFinite(id))
    );
  } catch {
    return [];
  }
}

/** True when the process died by itself within `ms` (a crash point); false otherwise. */
async function waitForDeath(
  state: RunState,
  gateway: GatewayProcess,
  ms: number,
): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline && !state.driversDone) {
    if (await gateway.exitsWithin(Math.min(100, deadline - Date.now()))) return true;
  }
  return gateway.exitStatus !== null;
}

/** Reads, while the gateway is dead, which turns and tool calls the kill cut off. */
function noteCutOff(rig: Rig, record: KillRecord): void {
  const killedAt = Date.now();
  try {
    rig.readDb((db) => {
      const turns = db
        .prepare("SELECT id, session_key FROM turns WHERE state = 'running'")
        .all() as { id: number; session_key: string }[];
      for (const t of turns)
        record.cutOff.push({ turnId: t.id, sessionKey: t.session_key, killedAt });
      const calls = db
        .prepare("SELECT tool_call_id, name FROM tool_calls WHERE state = 'started'")
        .all() as { tool_call_id: string; name: string }[];
      for (const c of calls) record.cutOffToolCalls.set(c.tool_call_id, c.name);
    });
  } catch {
    // Killed before the database existed: nothing was cut off.
  }
}

/** A clean start that runs until every sent message is answered (bounded), then a clean stop. */
async function settle(state: RunState, settleMs: number): Promise<void> {
  const { rig } = state;
  const gateway = await rig.spawn({ busyMode: "interrupt" });
  try {
    await gateway.waitForRunning(20_000);
    await until(() => state.driversDone && allAnswered(state), settleMs);
    // Let a duplicate delivery or a late resume show itself before the record is read.
    await sleep(1000);
  } finally {
    await gateway.terminate();
  }
}

function allAnswered(state: RunState): boolean {
  return state.sent.every((m) => isAnswered(state.rig, m.chatId, m.id));
}

function finish(state: RunState, options: ChaosOptions, record: KillRecord): ChaosResult {
  const { rig } = state;
  const turns = rig.readDb(
    (db) =>
      db.prepare("SELECT id, session_key, state, started_at FROM turns").all() as {
        id: number;
        session_key: string;
        state: string;
        started_at: number;
      }[],
  );
  const chats = [...new Set(state.sent.map((m) => m.chatId))];
  const verdict = checkHistory({
    sent: state.sent,
    botMessages: chats.flatMap((chatId) =>
      rig.telegram
        .chatLog(chatId)
        .filter((e) => e.from === "bot")
        .map((e) => ({ chatId, text: e.text })),
    ),
    ledger: rig.ledgerLines(),
    cutOff: record.cutOff,
    turns: turns.map(
      (t): TurnRow => ({
        id: t.id,
        sessionKey: t.session_key,
        state: t.state,
        startedAt: t.started_at,
      }),
    ),
    sessionKeyOf: (chatId) => rig.sessionKey(chatId),
  });
  const figures: ChaosFigures = {
    turns: state.sent.length,
    kills: record.kills,
    lost: verdict.lost.length,
    duplicate_tool_runs: verdict.duplicateToolRuns.length,
    unresumed: verdict.unresumed.length,
    duplicate_replies: verdict.duplicateReplies.length,
  };
  const ok = figures.lost === 0 && figures.duplicate_tool_runs === 0 && figures.unresumed === 0;
  writeReport(state, options, record, figures, verdict);
  return { figures, verdict, crashPointsHit: record.crashPointsHit, dir: rig.dir, ok };
}

function writeReport(
  state: RunState,
  options: ChaosOptions,
  record: KillRecord,
  figures: ChaosFigures,
  verdict: Verdict,
): void {
  const { rig } = state;
  const cutOffCalls = [...record.cutOffToolCalls];
  const sessions = rig.readDb((db) =>
    db.prepare("SELECT key, interrupt_count, suspended, resume_pending FROM sessions").all(),
  );
  const report = {
    seed: options.seed,
    turnsPlanned: options.turns,
    figures,
    crashPointsHit: record.crashPointsHit,
    calmKills: record.calmKills,
    unexpectedExits: record.unexpectedExits,
    cutOffTurns: new Set(record.cutOff.map((c) => c.turnId)).size,
    cutOffToolCalls: {
      sideEffecting: cutOffCalls.filter(([, name]) => name !== "read_file").length,
      toldOutcomeUnknown: cutOffCalls.filter(([id]) => rig.chaos.unknownOutcomeSeen.has(id)).length,
      readOnly: cutOffCalls.filter(([, name]) => name === "read_file").length,
      readOnlyReRun: cutOffCalls.filter(([id]) => rig.chaos.readResultSeen.has(id)).length,
    },
    modelAnswers: rig.chaos.answers(),
    toolCallsAsked: rig.chaos.toolCalls.size,
    ledgerLines: rig.ledgerLines().length,
    verdict,
    sessions,
  };
  writeFileSync(join(rig.dir, "chaos-report.json"), `${JSON.stringify(report, null, 2)}\n`);
}

function progressLine(state: RunState): string {
  const answered = state.sent.filter((m) => isAnswered(state.rig, m.chatId, m.id)).length;
  return `chaos: kills=${state.kills} sent=${state.sent.length} answered=${answered}`;
}
