/**
 * What a chaos run does, decided up front from the seed: the conversations (messages and their
 * kinds, bursts sent while the session is busy, pauses) and the kill schedule (every named crash
 * point once, then random SIGKILLs and more crash points). Timing is real, so two runs with one
 * seed send the same messages and kill in the same way, though not at the same microsecond.
 */
import { CRASH_POINTS } from "../../src/lib/crash-point.js";
import { MESSAGE_KINDS, type MessageKind } from "./chaos-model.js";
import type { Rng } from "./prng.js";
import type { BusyMode } from "./rig.js";

export interface PlannedMessage {
  /** `c<conversation>.<n>`: unique in the run. */
  id: string;
  kind: MessageKind;
}

export interface PlannedStep {
  /** One message, or a burst of several sent back to back (the later ones hit a busy session). */
  messages: PlannedMessage[];
  /** Gap between the messages of a burst. */
  burstGapMs: number;
  /** Pause after the step is answered, before the next one. */
  pauseMs: number;
}

export interface Conversation {
  chatId: number;
  steps: PlannedStep[];
}

const BURST_KINDS: readonly MessageKind[] = ["plain", "slow", "tool", "slowtool"];

/** Splits `turns` messages over `count` conversations, about one step in six a burst. */
export function planConversations(rng: Rng, turns: number, count: number): Conversation[] {
  const conversations: Conversation[] = Array.from({ length: count }, (_, i) => ({
    chatId: 7001 + i,
    steps: [],
  }));
  const next = conversations.map(() => 1);
  let left = turns;
  let turn = 0;
  while (left > 0) {
    const c = turn++ % count;
    const size = Math.min(left, rng.chance(0.17) ? rng.int(2, 3) : 1);
    const messages = Array.from({ length: size }, () => ({
      id: `c${c + 1}.${next[c]!++}`,
      kind: size > 1 ? rng.pick(BURST_KINDS) : rng.pick(MESSAGE_KINDS),
    }));
    conversations[c]!.steps.push({
      messages,
      burstGapMs: rng.int(30, 250),
      pauseMs: rng.int(0, 400),
    });
    left -= size;
  }
  return conversations;
}

export interface Episode {
  /** KEEL_CRASH_POINT for this gateway process, or null for a kill at a random moment. */
  crashPoint: string | null;
  /** For a random kill: ms after the spawn (so some kills land during start-up and recovery). */
  killAfterMs: number;
  /** Time the gateway stays down after the kill (messages pile up at the fake Telegram). */
  downMs: number;
  busyMode: BusyMode;
}

const BUSY_MODES: readonly BusyMode[] = ["interrupt", "queue", "steer"];

/**
 * An endless kill schedule: every crash point (shuffled) until each has been hit, then a random
 * mix. `missed(point)` puts a crash point whose gateway never reached it back in the round, so
 * that a run long enough covers every point whatever the timing.
 */
export function createEpisodes(
  rng: Rng,
  points: readonly string[] = CRASH_POINTS,
): {
  next(): Episode;
  missed(point: string): void;
  crashLoop(): Episode[];
  /** Crash points of the first round not hit yet. */
  roundLeft(): number;
} {
  const round = [...rng.shuffle(points)] as string[];
  return {
    next: () => episodeFrom(rng, round.shift()),
    missed: (point) => round.push(point.split(":")[0]!),
    crashLoop: () => crashLoopEpisodes(rng),
    roundLeft: () => round.length,
  };
}

/** Starts in a crash loop, each killed within 2 s of its spawn (see crashLoopEpisodes). */
export const CRASH_LOOP_STARTS = 5;

/**
 * A crash loop (an OOM loop, a bad deploy): five starts, each SIGKILLed within 2 s of its spawn,
 * no pause in between, while the conversations keep sending; the busy modes take turns.
 */
function crashLoopEpisodes(rng: Rng): Episode[] {
  const first = rng.int(0, BUSY_MODES.length - 1);
  return Array.from({ length: CRASH_LOOP_STARTS }, (_, i) => ({
    crashPoint: null,
    killAfterMs: rng.int(100, 2000),
    downMs: 0,
    busyMode: BUSY_MODES[(first + i) % BUSY_MODES.length]!,
  }));
}

/**
 * Planned episodes before a stable gateway: four while named crash points of the first round
 * are left (so a short run reaches them all), then one to four.
 */
export function cycleLength(rng: Rng, roundLeft: number): number {
  return roundLeft > 0 ? 4 : rng.int(1, 4);
}

export { BUSY_MODES };

function episodeFrom(rng: Rng, scheduled: string | undefined): Episode {
  const point = scheduled ?? (rng.chance(0.3) ? rng.pick(CRASH_POINTS) : null);
  // The first round kills at the first hit, so that a short run reaches every point.
  const hit = scheduled !== undefined ? 1 : rng.int(1, 3);
  return {
    // Recovery runs once per start: its point can only be hit the first time.
    crashPoint: point ? `${point}:${point === "mid_recovery" ? 1 : hit}` : null,
    killAfterMs: rng.int(100, 3500),
    downMs: rng.chance(0.3) ? rng.int(100, 1500) : 0,
    busyMode: rng.pick(BUSY_MODES),
  };
}
