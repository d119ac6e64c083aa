/**
 * One chaos run: the real gateway process under a chat platform's stand-in (Telegram unless told;
 * chats.ts has the users of each) and the chaos model,
 * with the shipped defaults (restart-loop breaker included), conversations driven in the
 * background. The kills come in cycles: a crash loop (five starts each killed within 2 s) or one
 * to four kills at named crash points and random moments, then a stable gateway that runs until
 * the breaker's held-back sessions have resumed and is killed at a random moment. Then one clean
 * start lets everything settle, and the whole history is checked (check-history.ts). Everything
 * is bounded in time.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { INTERRUPTED_MARK } from "../../src/platforms/stream-editor.js";
import { readBootHistory } from "../../src/recovery/boot-history.js";
import type { GatewayProcess } from "../helpers/gateway-process.js";
import { answeredIds } from "./chaos-model.js";
import type { ChaosPlatform } from "./chats.js";
import {
  type CutOffTurn,
  checkHistory,
  type SentMessage,
  type TurnRow,
  type Verdict,
} from "./check-history.js";
import {
  BUSY_MODES,
  type Conversation,
  createEpisodes,
  cycleLength,
  type Episode,
  planConversations,
} from "./plan.js";
import { createRng } from "./prng.js";
import { type BusyMode, type ChaosStore, createRig, type Rig } from "./rig.js";

export interface ChaosOptions {
  /** User messages to send in total. */
  turns: number;
  seed: number;
  /** Chats driven in parallel (default: one per six turns, 2 to 8). */
  conversations?: number;
  /** Bound of the kill phase; the settle phase adds at most `settleMs` (default: window + 90 s). */
  timeLimitMs?: number;
  settleMs?: number;
  /** `agent.resume_breaker_window` (s) for the gateways; default: the shipped default. */
  breakerWindowSeconds?: number;
  /** Crash points the first round aims at (default: all); a later run covers what one missed. */
  crashPoints?: readonly string[];
  /** Work folder (default: a temporary folder). */
  dir?: string;
  /**
   * The gateway's store (default SQLite). On Postgres a killed gateway is started again within a
   * second, as a service manager would (`Restart=always`, `RestartSec=1`).
   */
  store?: ChaosStore;
  /** Where the users write (default Telegram). */
  platform?: ChaosPlatform;
  /** Called with a progress line every few seconds. */
  onProgress?: (line: string) => void;
  /** Given the last gateway's `GET /metrics` text, read before it stops. */
  onMetrics?: (text: string) => void;
}

export interface ChaosFigures {
  turns: number;
  kills: number;
  lost: number;
  duplicate_tool_runs: number;
  /** Answers shown again by another turn (check-history.ts): a fault, unlike duplicate_replies. */
  replies_shown_twice: number;
  unresumed: number;
  duplicate_replies: number;
  /** Starts at which the restart-loop breaker held resumes back. */
  breaker_trips: number;
  /** Held-back sessions resumed once a gateway had stayed up for the breaker window. */
  held_resumes: number;
  /** "Held back" notices the chats received. */
  held_notices: number;
  /** "Dropped" notices (a suspended session); the harness answers each with /retry, as a user would. */
  dropped_notices: number;
  /** Answers the chats show in a message that was edited into them (a streamed preview). */
  edited_replies: number;
  /** Preview messages left saying they were cut off (by a kill or an interrupting message). */
  interrupted_previews: number;
  /** Tasks (delegate, /bg) on record at the end, and how many of them ended `done`. */
  tasks?: number;
  tasks_done?: number;
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
  return (
    `turns=${f.turns} kills=${f.kills} lost=${f.lost} duplicate_tool_runs=${f.duplicate_tool_runs} ` +
    `replies_shown_twice=${f.replies_shown_twice} ` +
    `unresumed=${f.unresumed} duplicate_replies=${f.duplicate_replies} breaker_trips=${f.breaker_trips} ` +
    `held_resumes=${f.held_resumes} held_notices=${f.held_notices} dropped_notices=${f.dropped_notices} ` +
    `edited_replies=${f.edited_replies} interrupted_previews=${f.interrupted_previews}` +
    (f.tasks === undefined ? "" : ` tasks=${f.tasks} tasks_done=${f.tasks_done ?? 0}`)
  );
}

const CRASH_POINT_WAIT_MS = 15_000;
/** A crash loop now and then (the second cycle always is one). */
const CRASH_LOOP_CHANCE = 0.3;
const HELD_NOTICE = "⏸ The gateway restarted";
const DROPPED_NOTICE = "◐ ";

interface RunState {
  rig: Rig;
  sent: SentMessage[];
  stopping: boolean;
  driversDone: boolean;
  kills: number;
  /** How long a step waits for its answers: through a crash loop and the breaker window. */
  stepTimeoutMs: number;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const count = options.conversations ?? Math.min(8, Math.max(2, Math.ceil(options.turns / 6)));
  const conversations = planConversations(createRng(options.seed), options.turns, count);
  const rig = await createRig({
    chats: conversations.map((c) => c.chatId),
    seed: options.seed,
    dir: options.dir,
    ...(options.store && { store: options.store }),
    ...(options.platform && { platform: options.platform }),
    ...(options.breakerWindowSeconds !== undefined && {
      breakerWindowSeconds: options.breakerWindowSeconds,
    }),
  });
  const state: RunState = {
    rig,
    sent: [],
    stopping: false,
    driversDone: false,
    kills: 0,
    stepTimeoutMs: rig.breakerWindowMs + 150_000,
  };
  await rig.chats.introduce?.(() => rig.start());
  const drivers = Promise.all(conversations.map((c) => drive(state, c))).then(() => {
    state.driversDone = true;
  });
  const progress = setInterval(() => options.onProgress?.(progressLine(state)), 10_000);
  let ok = false;
  try {
    const kills = await killLoop(state, options);
    await settle(state, options.settleMs ?? rig.breakerWindowMs + 90_000, options.onMetrics);
    state.stopping = true;
    await drivers;
    const result = await finish(state, options, kills);
    ok = result.ok;
    return result;
  } finally {
    clearInterval(progress);
    state.stopping = true;
    // A failed run keeps its database (Postgres) beside its folder, for the post-mortem.
    await rig.close({ keepDir: true, keepStore: !ok });
  }
}

export function isAnswered(rig: Pick<Rig, "chats">, chatId: number, id: string): boolean {
  return rig.chats.botMessages(chatId).some((e) => answeredIds(e.text).includes(id));
}

/**
 * Sends a conversation's steps; each waits (bounded) until its messages are answered. A
 * "dropped" notice (the session was suspended) is answered with /retry, as its text asks.
 */
export async function drive(
  state: Pick<RunState, "sent" | "stopping" | "stepTimeoutMs"> & { rig: Pick<Rig, "chats"> },
  conversation: Conversation,
): Promise<void> {
  const { rig } = state;
  let retried = 0;
  const retryDropped = () => {
    const dropped = rig.chats
      .botMessages(conversation.chatId)
      .filter((e) => e.text.startsWith(DROPPED_NOTICE)).length;
    for (; retried < dropped; retried += 1) rig.chats.send(conversation.chatId, "/retry");
  };
  for (const step of conversation.steps) {
    if (state.stopping) return;
    const stepStartedAt = Date.now();
    for (const [i, message] of step.messages.entries()) {
      if (i > 0) await sleep(step.burstGapMs);
      const sentAt = Date.now();
      state.sent.push({ id: message.id, chatId: conversation.chatId, sentAt, stepStartedAt });
      rig.chats.send(
        conversation.chatId,
        // A background task is started with the chat command; its result answers the message.
        message.kind === "bgtask" ? `/bg ${message.id} child` : `${message.id} ${message.kind}`,
      );
    }
    await until(() => {
      retryDropped();
      return (
        state.stopping || step.messages.every((m) => isAnswered(rig, conversation.chatId, m.id))
      );
    }, state.stepTimeoutMs);
    await sleep(step.pauseMs);
  }
}

export async function until(
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
  /** Stable gateways (run until the held-back sessions resumed, then killed). */
  stableKills: number;
  crashLoops: number;
  cutOff: CutOffTurn[];
  crashPointsHit: Record<string, number>;
  cutOffToolCalls: Map<string, string>;
  unexpectedExits: number;
}

/**
 * Starts and kills gateways in cycles until the conversations are done or the time limit is
 * reached: a crash loop or a few planned episodes, then a stable gateway.
 */
async function killLoop(state: RunState, options: ChaosOptions): Promise<KillRecord> {
  const record: KillRecord = {
    kills: 0,
    stableKills: 0,
    crashLoops: 0,
    cutOff: [],
    crashPointsHit: {},
    cutOffToolCalls: new Map(),
    unexpectedExits: 0,
  };
  const rng = createRng(options.seed ^ 0x5bd1e995);
  const episodes = createEpisodes(rng, options.crashPoints);
  const deadline = Date.now() + (options.timeLimitMs ?? 10 * 60_000);
  const going = () => !state.driversDone && Date.now() < deadline;
  const afterDeath = async () => {
    record.kills += 1;
    state.kills = record.kills;
    await noteCutOff(state.rig, record);
  };
  let cycle = 0;
  while (going()) {
    // The second cycle is a crash loop, then one now and then once the crash points were hit.
    const crashLoop: boolean =
      cycle === 1 || (episodes.roundLeft() === 0 && cycle > 1 && rng.chance(CRASH_LOOP_CHANCE));
    const planned = crashLoop ? episodes.crashLoop() : null;
    const length = planned?.length ?? cycleLength(rng, episodes.roundLeft());
    if (crashLoop) record.crashLoops += 1;
    for (let i = 0; i < length && going(); i += 1) {
      // Three cut-offs in a row suspend a session (tested elsewhere); a boot the breaker holds
      // back resumes nothing, so only a boot that resumes can add the third.
      if (
        (await chatsNearSuspension(state.rig)).length > 0 &&
        !(await nextBootHoldsBack(state.rig))
      ) {
        break;
      }
      const episode = planned?.[i] ?? episodes.next();
      const hit = await runEpisode(state, episode, record);
      if (episode.crashPoint && !hit) episodes.missed(episode.crashPoint);
      await afterDeath();
    }
    if (!going()) break;
    await stableEpisode(state, rng.pick(BUSY_MODES), rng.int(100, 3500));
    record.stableKills += 1;
    await afterDeath();
    cycle += 1;
  }
  state.stopping = Date.now() >= deadline;
  return record;
}

/** One planned episode: a crash point or a SIGKILL at a random moment; true when a crash point was hit. */
async function runEpisode(state: RunState, planned: Episode, record: KillRecord): Promise<boolean> {
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
  // On Postgres the gateway stands for a service manager's unit: back within a second.
  const downMs = state.rig.store === "postgres" ? Math.min(planned.downMs, 1000) : planned.downMs;
  if (downMs > 0) await sleep(downMs);
  return hit;
}

/**
 * A gateway that stays up until the record has settled — no session resume-pending (the
 * breaker's held-back ones resume once it has been up for the window) and no session with a
 * cut-off streak running a turn — then runs `killAfterMs` more in normal traffic and is killed.
 * The record is read while the gateway runs (WAL).
 */
async function stableEpisode(state: RunState, busyMode: BusyMode, killAfterMs: number) {
  const { rig } = state;
  const gateway = await rig.spawn({ busyMode });
  if (await gateway.waitForRunning(20_000)) {
    const deadline = Date.now() + rig.breakerWindowMs + 45_000;
    while (!state.driversDone && Date.now() < deadline && !(await settled(rig))) await sleep(200);
    if (!state.driversDone) await sleep(killAfterMs);
  }
  await gateway.stop();
}

async function settled(rig: Rig): Promise<boolean> {
  try {
    const [row] = await rig.query(
      `SELECT
         (SELECT COUNT(*) FROM sessions WHERE resume_pending <> FALSE) AS pending,
         (SELECT COUNT(*) FROM sessions s WHERE s.interrupt_count > 0 AND EXISTS
            (SELECT 1 FROM turns t WHERE t.session_key = s.key AND t.state = 'running')) AS streaks`,
    );
    return Number(row?.pending) === 0 && Number(row?.streaks) === 0;
  } catch {
    return false;
  }
}

/** True when the next start with resumable sessions trips the breaker (it holds them back). */
async function nextBootHoldsBack(rig: Rig): Promise<boolean> {
  // Judged 5 s ahead: the next start records its boot a moment from now.
  const boots = await readBootHistory(rig.home, Date.now() + 5000, rig.breakerWindowMs);
  return boots.length >= 2;
}

/** Sessions that will count two or more cut-offs in a row once recovery has run. */
async function chatsNearSuspension(rig: Rig): Promise<string[]> {
  try {
    const rows = await rig.query(
      `SELECT s.key, s.interrupt_count,
         (SELECT COUNT(*) FROM turns t WHERE t.session_key = s.key AND t.state = 'running') AS running
       FROM sessions s`,
    );
    return (
      rows
        // A running turn cut off now counts once more at recovery, resumed turns included.
        .filter((r) => Number(r.interrupt_count) + (Number(r.running) > 0 ? 1 : 0) >= 2)
        .map((r) => String(r.key))
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
async function noteCutOff(rig: Rig, record: KillRecord): Promise<void> {
  const killedAt = Date.now();
  try {
    const turns = await rig.query("SELECT id, session_key FROM turns WHERE state = 'running'");
    for (const t of turns)
      record.cutOff.push({ turnId: Number(t.id), sessionKey: String(t.session_key), killedAt });
    const calls = await rig.query(
      "SELECT tool_call_id, name FROM tool_calls WHERE state = 'started'",
    );
    for (const c of calls) record.cutOffToolCalls.set(String(c.tool_call_id), String(c.name));
  } catch {
    // Killed before the database existed: nothing was cut off.
  }
}

/** A clean start that runs until every sent message is answered (bounded), then a clean stop. */
async function settle(
  state: RunState,
  settleMs: number,
  onMetrics?: (text: string) => void,
): Promise<void> {
  const { rig } = state;
  const gateway = await rig.spawn({ busyMode: "interrupt", http: onMetrics !== undefined });
  try {
    await gateway.waitForRunning(20_000);
    await until(() => state.driversDone && allAnswered(state), settleMs);
    // Let a duplicate delivery or a late resume show itself before the record is read.
    await sleep(1000);
    if (onMetrics) {
      const res = await fetch(`${gateway.baseUrl}/metrics`, {
        headers: { authorization: `Bearer ${gateway.controlToken}` },
      });
      onMetrics(await res.text());
    }
  } finally {
    await gateway.terminate();
  }
}

function allAnswered(state: RunState): boolean {
  return state.sent.every((m) => isAnswered(state.rig, m.chatId, m.id));
}

async function finish(
  state: RunState,
  options: ChaosOptions,
  record: KillRecord,
): Promise<ChaosResult> {
  const { rig } = state;
  const turns = await rig.query("SELECT id, session_key, state, started_at FROM turns");
  const chats = [...new Set(state.sent.map((m) => m.chatId))];
  const verdict = checkHistory({
    sent: state.sent,
    botMessages: chats.flatMap((chatId) =>
      rig.chats.botMessages(chatId).map((e) => ({ chatId, text: e.text })),
    ),
    ledger: rig.ledgerLines(),
    cutOff: record.cutOff,
    turns: turns.map(
      (t): TurnRow => ({
        id: Number(t.id),
        sessionKey: String(t.session_key),
        state: String(t.state),
        startedAt: Number(t.started_at),
      }),
    ),
    sessionKeyOf: (chatId) => rig.sessionKey(chatId),
  });
  const botEntries = chats.flatMap((chatId) => rig.chats.botMessages(chatId));
  const figures = figuresOf({
    sent: state.sent.length,
    kills: record.kills,
    verdict,
    botEntries,
    logs: [gatewayLog(rig.home)],
  });
  const tasks = await rig.query("SELECT state FROM tasks");
  figures.tasks = tasks.length;
  figures.tasks_done = tasks.filter((t) => t.state === "done").length;
  const ok = passes(figures);
  await writeReport(state, options, record, figures, verdict);
  return { figures, verdict, crashPointsHit: record.crashPointsHit, dir: rig.dir, ok };
}

/** What a run must show: nothing lost, no tool run twice, no answer shown twice, all resumed. */
export function passes(f: ChaosFigures): boolean {
  return (
    f.lost === 0 && f.duplicate_tool_runs === 0 && f.replies_shown_twice === 0 && f.unresumed === 0
  );
}

/** The figures line's numbers, from the verdict, what the chats show and the gateways' logs. */
export function figuresOf(input: {
  sent: number;
  kills: number;
  verdict: Verdict;
  botEntries: { text: string; edited: boolean }[];
  logs: string[];
}): ChaosFigures {
  const { verdict, botEntries } = input;
  const botTexts = botEntries.map((e) => e.text);
  const breaker = input.logs
    .map(breakerLog)
    .reduce((a, b) => ({ trips: a.trips + b.trips, heldResumes: a.heldResumes + b.heldResumes }), {
      trips: 0,
      heldResumes: 0,
    });
  return {
    turns: input.sent,
    kills: input.kills,
    lost: verdict.lost.length,
    duplicate_tool_runs: verdict.duplicateToolRuns.length,
    replies_shown_twice: verdict.repliesShownTwice.length,
    unresumed: verdict.unresumed.length,
    duplicate_replies: verdict.duplicateReplies.length,
    breaker_trips: breaker.trips,
    held_resumes: breaker.heldResumes,
    held_notices: botTexts.filter((t) => t.startsWith(HELD_NOTICE)).length,
    dropped_notices: botTexts.filter((t) => t.startsWith(DROPPED_NOTICE)).length,
    edited_replies: botEntries.filter((e) => e.edited && answeredIds(e.text).length > 0).length,
    interrupted_previews: botTexts.filter((t) => t.includes(INTERRUPTED_MARK.trim())).length,
  };
}

function gatewayLog(home: string): string {
  try {
    return readFileSync(join(home, "logs", "gateway.log"), "utf8");
  } catch {
    return "";
  }
}

/** From a gateway's log: starts at which the breaker tripped, and sessions it resumed later. */
function breakerLog(text: string): { trips: number; heldResumes: number } {
  let trips = 0;
  let heldResumes = 0;
  for (const line of text.split("\n")) {
    if (!line.includes("restart loop detected") && !line.includes("resuming held-back sessions"))
      continue;
    try {
      const entry = JSON.parse(line) as { msg?: string; sessions?: unknown[] };
      if (entry.msg?.startsWith("restart loop detected")) trips += 1;
      else if (entry.msg === "resuming held-back sessions")
        heldResumes += entry.sessions?.length ?? 0;
    } catch {
      // A line cut off by SIGKILL.
    }
  }
  return { trips, heldResumes };
}

async function writeReport(
  state: RunState,
  options: ChaosOptions,
  record: KillRecord,
  figures: ChaosFigures,
  verdict: Verdict,
): Promise<void> {
  const { rig } = state;
  const cutOffCalls = [...record.cutOffToolCalls];
  const sessions = await rig.query(
    "SELECT key, interrupt_count, suspended, resume_pending FROM sessions",
  );
  const report = {
    seed: options.seed,
    platform: rig.chats.platform,
    store: rig.store,
    turnsPlanned: options.turns,
    figures,
    crashPointsHit: record.crashPointsHit,
    stableKills: record.stableKills,
    crashLoops: record.crashLoops,
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
