/**
 * The checker: reads the whole history of a chaos run (what was sent, what each chat shows, the
 * side-effect ledger, the turns the kills cut off and the turns that ran after) and computes the
 * figures. The definitions (docs/crash-safety.md):
 *
 * - **answered**: a user message is answered when its chat shows a model reply, sent after it,
 *   that lists its id — i.e. the model saw the message and the answer reached the user.
 *   Notices ("Queued", "interrupted") do not count. **lost** = sent and never answered.
 * - **duplicate tool run**: a ledger line whose tool-call id already appears above it.
 * - **resumed**: a turn cut off by a kill (left `running` in the record) is resumed when a later
 *   turn of the same session finished `done` and started before the harness began a new step in
 *   that chat (the rest of a burst already under way does not count as new), i.e. the session
 *   continued by itself. **unresumed** = cut off, never resumed.
 * - **duplicate reply**: a model reply delivered again with the same text (each answer carries a
 *   unique `r` number, so equal texts are one reply delivered twice): the send-to-mark window
 *   docs/crash-safety.md accepts, bounded by the kills.
 * - **reply shown twice**: a second answer to a question the chat had already seen answered — a
 *   model reply (another `r` number, so another turn) that lists a message an earlier reply of
 *   the chat answered, or that answers nothing at all (a turn that finished was run again: the
 *   model saw no open message). Not accepted: the user sees the answer twice.
 */
import { answeredIds } from "./chaos-model.js";

export interface SentMessage {
  id: string;
  chatId: number;
  sentAt: number;
  /** When the harness began the step (burst) this message belongs to. */
  stepStartedAt: number;
}

export interface BotMessage {
  chatId: number;
  text: string;
}

export interface CutOffTurn {
  turnId: number;
  sessionKey: string;
  killedAt: number;
}

export interface TurnRow {
  id: number;
  sessionKey: string;
  state: string;
  startedAt: number;
}

export interface History {
  sent: SentMessage[];
  /** Bot messages of every chat, in order. */
  botMessages: BotMessage[];
  ledger: string[];
  cutOff: CutOffTurn[];
  turns: TurnRow[];
  sessionKeyOf(chatId: number): string;
}

export interface Verdict {
  lost: string[];
  duplicateToolRuns: string[];
  unresumed: CutOffTurn[];
  duplicateReplies: string[];
  repliesShownTwice: string[];
}

export function checkHistory(history: History): Verdict {
  return {
    lost: lostMessages(history),
    duplicateToolRuns: duplicates(history.ledger),
    unresumed: unresumedTurns(history),
    duplicateReplies: duplicateReplies(history.botMessages),
    repliesShownTwice: repliesShownTwice(history.botMessages),
  };
}

function lostMessages(history: History): string[] {
  const answered = new Set<string>();
  for (const message of history.botMessages) {
    for (const id of answeredIds(message.text)) answered.add(`${message.chatId}/${id}`);
  }
  return history.sent.filter((m) => !answered.has(`${m.chatId}/${m.id}`)).map((m) => m.id);
}

/** Every repeat of an earlier entry (an entry seen three times is listed twice). */
function duplicates(entries: string[]): string[] {
  const seen = new Set<string>();
  const repeats: string[] = [];
  for (const entry of entries) {
    if (seen.has(entry)) repeats.push(entry);
    seen.add(entry);
  }
  return repeats;
}

function duplicateReplies(messages: BotMessage[]): string[] {
  const replies = messages
    .filter((m) => answeredIds(m.text).length > 0 || m.text.startsWith("re "))
    .map((m) => `${m.chatId}/${m.text}`);
  return duplicates(replies);
}

/** Final model replies (`chat/text`) that answer again what the chat already showed answered. */
function repliesShownTwice(messages: BotMessage[]): string[] {
  const seenTexts = new Set<string>();
  const answered = new Set<string>();
  const again: string[] = [];
  for (const original of messages) {
    // A background task's result is a model reply under the task's line.
    const message = { ...original, text: original.text.replace(/^🧵 task \d+ done\n/, "") };
    // A streamed reply marked interrupted answers nothing (lost is judged elsewhere).
    if (!message.text.startsWith("re ") || answeredIds(message.text).length === 0) {
      if (!isEmptyAnswer(message.text)) continue;
    }
    const entry = `${message.chatId}/${message.text}`;
    // The same text again is the same reply re-sent: counted as a duplicate reply.
    if (seenTexts.has(entry)) continue;
    seenTexts.add(entry);
    const ids = answeredIds(message.text).map((id) => `${message.chatId}/${id}`);
    if (ids.length === 0 || ids.some((id) => answered.has(id))) again.push(entry);
    for (const id of ids) answered.add(id);
  }
  return again;
}

/** A whole model reply listing no message (`re r7`): the model had nothing open to answer. */
function isEmptyAnswer(text: string): boolean {
  return /^re\s+r\d+$/.test(text.trim());
}

function unresumedTurns(history: History): CutOffTurn[] {
  const unique = new Map<number, CutOffTurn>();
  for (const cut of history.cutOff) if (!unique.has(cut.turnId)) unique.set(cut.turnId, cut);
  return [...unique.values()].filter((cut) => {
    const chatId = history.sent.find(
      (m) => history.sessionKeyOf(m.chatId) === cut.sessionKey,
    )?.chatId;
    const nextSend = history.sent
      .filter((m) => m.chatId === chatId && m.stepStartedAt > cut.killedAt)
      .reduce((min, m) => Math.min(min, m.stepStartedAt), Number.POSITIVE_INFINITY);
    return !history.turns.some(
      (t) =>
        t.sessionKey === cut.sessionKey &&
        t.id > cut.turnId &&
        t.state === "done" &&
        t.startedAt <= nextSend,
    );
  });
}
