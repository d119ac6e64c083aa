/**
 * An aged store for `npm run bench -- --aged`: sessions and messages written through the store's
 * own API (the calls a gateway makes for a turn), so the rows, indexes and side tables look as a
 * year of use leaves them. Each session is one chat (Telegram, web chat or `/v1`, in turn) with
 * one inbound message, one turn of `messagesPerSession` messages (the user's, tool calls and
 * results, the answer) with the model calls' usage, and its reply delivered through the outbox.
 */
import type { ChatMessage } from "../src/agent/types.js";
import type { ChatAddress } from "../src/contract/platform.js";
import type { Store } from "../src/sessions/store.js";

/**
 * The clock a seeding store is opened with: seedAgedStore moves it through the year before
 * `until`, so the sessions are spread over a year as a gateway's are, and none is recent.
 */
export class SeedClock {
  at = Date.now();
  readonly now = () => this.at;
}

const YEAR_MS = 365 * 24 * 3600_000;

export interface SeedOptions {
  sessions: number;
  /** Messages per session, at least 2 (the user's and the answer). */
  messagesPerSession: number;
  /** Sessions written at once (the store's group commit takes them together). */
  concurrency?: number;
  /** Called every 5,000 sessions with how many are done. */
  progress?: (done: number) => void;
  /** The store's clock, moved from a year before `until` (default: a day ago) up to it. */
  clock?: SeedClock;
  until?: number;
}

const PLATFORMS = ["telegram", "webchat", "api"] as const;

function addressOf(i: number): { address: ChatAddress; key: string } {
  const platform = PLATFORMS[i % PLATFORMS.length]!;
  const chatId = String(100_000 + i);
  const key =
    platform === "telegram"
      ? `agent:main:telegram:dm:${chatId}`
      : `agent:main:${platform}:${chatId}`;
  return { address: { platform, chatId }, key };
}

const usage = { model: "bench-model", promptTokens: 900, completionTokens: 60, estimated: false };

/** The middle of a turn: assistant tool calls and their results, in pairs. */
function middle(count: number, i: number): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let n = 0; n < count; n += 1) {
    const id = `call_${i}_${n}`;
    out.push(
      n % 2 === 0
        ? {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id,
                type: "function",
                function: { name: "terminal", arguments: `{"command":"ls -l /tmp/${n}"}` },
              },
            ],
          }
        : {
            role: "tool",
            tool_call_id: `call_${i}_${n - 1}`,
            content: `total ${n}\n-rw-r--r-- 1 keel keel 1024 report-${i}.txt`,
          },
    );
  }
  return out;
}

/** One session as a gateway writes it: inbound, turn start, the model calls, turn end. */
async function seedSession(store: Store, i: number, messages: number): Promise<void> {
  const { address, key } = addressOf(i);
  const text = `Question ${i}: what is in the report for week ${i % 52}?`;
  const { item } = await store.acceptInbound({
    platform: address.platform,
    chatId: address.chatId,
    platformMessageId: `m${i}`,
    sessionKey: key,
    text,
    senderId: address.chatId,
    senderName: `User ${i}`,
    address,
  });
  const turn = await store.startTurn({
    sessionKey: key,
    inboxId: item.id,
    userMessage: { role: "user", content: text },
    origin: address,
  });
  const calls = messages - 2;
  if (calls > 0) {
    // Three model calls' worth at a time (the agent appends after each call): fewer
    // transactions than a live gateway's, the same rows.
    const batch = middle(calls, i);
    for (let at = 0; at < batch.length; at += 6) {
      await store.appendMessages(turn.sessionId, turn.id, batch.slice(at, at + 6), [], usage);
    }
  }
  const answer = `The report for week ${i % 52} lists ${i % 7} files.`;
  const reply = await store.finishTurn({
    turnId: turn.id,
    state: "done",
    finalMessage: { role: "assistant", content: answer },
    reply: { address, text: answer, inBand: address.platform === "api" },
    usage,
  });
  // Delivered, as the outbox leaves a reply that reached its chat.
  if (reply && reply.state === "pending") await store.markDelivered(reply.id);
}

/** Seeds `options.sessions` sessions; resolves with the seconds it took. */
export async function seedAgedStore(store: Store, options: SeedOptions): Promise<number> {
  const started = performance.now();
  const concurrency = options.concurrency ?? 64;
  const until = options.until ?? Date.now() - 24 * 3600_000;
  let next = 0;
  const worker = async () => {
    while (next < options.sessions) {
      const i = next++;
      if (options.clock)
        options.clock.at = until - YEAR_MS + Math.floor((i / options.sessions) * YEAR_MS);
      await seedSession(store, i, options.messagesPerSession);
      if ((i + 1) % 5000 === 0) options.progress?.(i + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return (performance.now() - started) / 1000;
}

/**
 * `count` turns left running, as a SIGKILL leaves them: each session's inbound message taken and
 * its turn started, nothing after. The gateway that opens the store next must recover them.
 */
export async function seedOpenTurns(store: Store, count: number, offset: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = offset + next++;
      const { address, key } = addressOf(i);
      const text = `Open question ${i}`;
      const { item } = await store.acceptInbound({
        platform: address.platform,
        chatId: address.chatId,
        platformMessageId: `open${i}`,
        sessionKey: key,
        text,
        address,
      });
      await store.startTurn({
        sessionKey: key,
        inboxId: item.id,
        userMessage: { role: "user", content: text },
        origin: address,
      });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}
