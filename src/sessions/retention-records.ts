/**
 * Records of the data lifecycle (RetentionStore in roles.ts): what pruning removes, what one
 * person left in the store, what forgetting them removed, and the counts a backup records.
 */

/** Epoch-ms cut-offs of `retention:`; an absent one keeps that kind of data. */
export interface RetentionCutoffs {
  /** Messages of turns older than this go (and the loose rows of that age: inbox, outbox, events). */
  transcriptsBefore?: number;
  /** Tool results older than this are replaced by the pruned marker; the journal rows stay. */
  toolOutputBefore?: number;
  /** Whole sessions not updated since this go. */
  sessionsIdleBefore?: number;
}

/** What one prune step removed (or, in a dry run, would remove). */
export interface PruneCounts {
  sessions: number;
  transcripts: number;
  messages: number;
  toolOutputs: number;
  inbox: number;
  outbox: number;
  events: number;
  approvals: number;
}

export function emptyPruneCounts(): PruneCounts {
  return {
    sessions: 0,
    transcripts: 0,
    messages: 0,
    toolOutputs: 0,
    inbox: 0,
    outbox: 0,
    events: 0,
    approvals: 0,
  };
}

export function addPruneCounts(into: PruneCounts, more: PruneCounts): PruneCounts {
  for (const key of Object.keys(more) as (keyof PruneCounts)[]) into[key] += more[key];
  return into;
}

/** The text a pruned tool result is replaced with (the journal row and its arguments stay). */
export const PRUNED_TOOL_OUTPUT = "[pruned: tool output removed by retention.tool_output_days]";
/** What a forgotten person's message in a shared chat reads afterwards. */
export const FORGOTTEN_TEXT = "[removed at the sender's request]";

/** Transcripts and files pruning must leave alone (work in progress), for the file sweep. */
export interface RetentionHolds {
  /** Transcript ids with a running turn, pending work, an open approval or a resume pending. */
  transcripts: string[];
  /** `sent_files` ids a pending outbox row still has to send. */
  fileIds: string[];
}

/** A person on a platform: `platform` + the platform's user id. */
export interface PersonRef {
  platform: string;
  userId: string;
}

/** One transcript a person took part in, as an export holds it. */
export interface PersonTranscript {
  sessionId: string;
  sessionKey: string;
  /** Only this person spoke there (their DM): every message is theirs or to them. */
  own: boolean;
  /** `own`: the whole transcript; shared chats: only this person's messages. */
  messages: { seq: number; role: string; body: unknown; createdAt: number }[];
}

/** Everything the store holds about one person (the export's `person.json`, files aside). */
export interface PersonData {
  person: PersonRef;
  transcripts: PersonTranscript[];
  /** Their inbound messages, every chat. */
  inbox: {
    id: number;
    chatId: string;
    text: string;
    senderName: string | null;
    receivedAt: number;
    sessionId: string;
  }[];
  /** Replies and notices to the chats that are theirs alone. */
  outbox: { id: number; text: string; kind: string; state: string; createdAt: number }[];
  pairing: {
    code: string;
    userName: string | null;
    createdAt: number;
    approvedAt: number | null;
  }[];
  /** Approvals they asked for or answered. */
  approvals: {
    id: string;
    summary: string;
    state: string;
    decision: string | null;
    createdAt: number;
  }[];
  usage: { calls: number; promptTokens: number; completionTokens: number };
  /** Transcript ids of their own chats (their upload folders are `workspace/inbox/<id>/`). */
  ownTranscripts: string[];
}

/** What forgetting one person did in the store. */
export type ForgetResult =
  | {
      ok: true;
      sessions: number;
      messages: number;
      redacted: number;
      inbox: number;
      outbox: number;
      approvals: number;
      pairing: number;
      ownTranscripts: string[];
    }
  /** They have work in progress (a running turn, pending messages or replies, an open approval). */
  | { ok: false; busy: string };

/** What a backup's manifest records of the store, and what verification compares. */
export interface StoreCounts {
  schemaVersion: number;
  sessions: number;
  transcripts: number;
  messages: number;
  inbox: number;
  outbox: number;
}

/** A forgetting that may go ahead, before anything is removed: nothing counted yet. */
export function forgetTally(ownTranscripts: string[]): Extract<ForgetResult, { ok: true }> {
  const zero = { sessions: 0, messages: 0, redacted: 0, inbox: 0, outbox: 0 };
  return { ok: true, ...zero, approvals: 0, pairing: 0, ownTranscripts };
}

/** Counts a removed session of the person's into the tally. */
export function countRemovedSession(
  tally: Extract<ForgetResult, { ok: true }>,
  removed: PruneCounts,
) {
  for (const key of ["sessions", "messages", "inbox", "outbox", "approvals"] as const) {
    tally[key] += removed[key];
  }
}

/** The memory user a person's sessions name (forgetting them unsets it). */
export function memoryUserOf(person: PersonRef): string {
  return `${person.platform}-${person.userId}`;
}
