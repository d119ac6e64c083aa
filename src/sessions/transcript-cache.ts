/**
 * Parsed transcripts kept between turns: a turn reads and parses only the messages written since
 * the previous read of its session instead of its whole history, and gets the same message
 * objects back, so per-message figures cached on them (the token gauge's sizes) stay valid.
 *
 * Correct only for a store whose message sequence order is its commit order and whose messages
 * are never changed once written: the SQLite store (one writer, reads never overlap a commit).
 * Postgres assigns sequence numbers before commit, so a read there could skip a row committed
 * late; PgStore does not use this.
 *
 * Bounded by an estimate of the heap it holds (each message's body plus the objects around it);
 * the session read longest ago goes first.
 */
import type { StoredMessage } from "./store.js";

/** A stored message and the length of its stored body. */
export interface SizedMessage {
  message: StoredMessage;
  chars: number;
}

/**
 * What a parsed message holds besides its body: three objects and a boxed timestamp, ~180 bytes
 * in a heap snapshot of short messages. Counted so that many short messages cannot grow the cache
 * past its budget (a budget of body length alone held 20,000 two-word messages as ~4 MB).
 */
const MESSAGE_OVERHEAD_BYTES = 200;

const heldBytes = (row: SizedMessage) => row.chars + MESSAGE_OVERHEAD_BYTES;

interface Entry {
  /** Messages with seq <= baseSeq are not held (a compaction stands in for them). */
  baseSeq: number;
  /** Every message up to this seq has been read. */
  lastSeq: number;
  rows: SizedMessage[];
  /** What the rows hold, by `heldBytes`. */
  bytes: number;
}

export class TranscriptCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * The session's messages after `afterSeq`, in order. `readAfter(seq)` must return the stored
   * messages with a greater seq, in order; it is called once, for what is not held yet.
   */
  read(
    sessionId: string,
    afterSeq: number,
    readAfter: (seq: number) => SizedMessage[],
  ): StoredMessage[] {
    const held = this.entries.get(sessionId);
    // Older rows than a compacted session's turns need (a whole-transcript read for a command or
    // the control API): read them apart, keeping what the next turn will ask for.
    if (held && afterSeq < held.baseSeq) return readAfter(afterSeq).map((row) => row.message);
    const entry = this.take(sessionId) ?? {
      baseSeq: afterSeq,
      lastSeq: afterSeq,
      rows: [],
      bytes: 0,
    };
    if (afterSeq > entry.baseSeq) dropThrough(entry, afterSeq);
    for (const row of readAfter(entry.lastSeq)) {
      entry.rows.push(row);
      entry.bytes += heldBytes(row);
      entry.lastSeq = row.message.seq;
    }
    if (entry.bytes <= this.maxBytes) this.keep(sessionId, entry);
    return entry.rows.map((row) => row.message);
  }

  /** Drops what is held of a transcript whose rows changed underneath (pruning, erasure). */
  forget(sessionId: string): void {
    this.take(sessionId);
  }

  /** Drops everything held (another process changed the database). */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  /** Removes and returns the session's entry (re-inserted by `keep`, which makes it the newest). */
  private take(sessionId: string): Entry | undefined {
    const entry = this.entries.get(sessionId);
    if (!entry) return undefined;
    this.entries.delete(sessionId);
    this.bytes -= entry.bytes;
    return entry;
  }

  private keep(sessionId: string, entry: Entry): void {
    this.entries.set(sessionId, entry);
    this.bytes += entry.bytes;
    for (const [oldest, old] of this.entries) {
      if (this.bytes <= this.maxBytes || oldest === sessionId) break;
      this.entries.delete(oldest);
      this.bytes -= old.bytes;
    }
  }
}

/** Forgets the messages a newer compaction stands in for. */
function dropThrough(entry: Entry, seq: number): void {
  let cut = 0;
  while (cut < entry.rows.length && entry.rows[cut]!.message.seq <= seq) {
    entry.bytes -= heldBytes(entry.rows[cut]!);
    cut += 1;
  }
  entry.rows.splice(0, cut);
  entry.baseSeq = seq;
  entry.lastSeq = Math.max(entry.lastSeq, seq);
}
