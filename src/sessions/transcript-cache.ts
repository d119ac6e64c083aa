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
 * Bounded by the total length of the stored message bodies; the session read longest ago goes
 * first.
 */
import type { StoredMessage } from "./store.js";

/** A stored message and the length of its stored body (what the cache counts). */
export interface SizedMessage {
  message: StoredMessage;
  chars: number;
}

interface Entry {
  /** Messages with seq <= baseSeq are not held (a compaction stands in for them). */
  baseSeq: number;
  /** Every message up to this seq has been read. */
  lastSeq: number;
  rows: SizedMessage[];
  /** The sum of the rows' `chars`. */
  chars: number;
}

export class TranscriptCache {
  private readonly entries = new Map<string, Entry>();
  private chars = 0;

  constructor(private readonly maxChars: number) {}

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
      chars: 0,
    };
    if (afterSeq > entry.baseSeq) dropThrough(entry, afterSeq);
    for (const row of readAfter(entry.lastSeq)) {
      entry.rows.push(row);
      entry.chars += row.chars;
      entry.lastSeq = row.message.seq;
    }
    if (entry.chars <= this.maxChars) this.keep(sessionId, entry);
    return entry.rows.map((row) => row.message);
  }

  /** Removes and returns the session's entry (re-inserted by `keep`, which makes it the newest). */
  private take(sessionId: string): Entry | undefined {
    const entry = this.entries.get(sessionId);
    if (!entry) return undefined;
    this.entries.delete(sessionId);
    this.chars -= entry.chars;
    return entry;
  }

  private keep(sessionId: string, entry: Entry): void {
    this.entries.set(sessionId, entry);
    this.chars += entry.chars;
    for (const [oldest, old] of this.entries) {
      if (this.chars <= this.maxChars || oldest === sessionId) break;
      this.entries.delete(oldest);
      this.chars -= old.chars;
    }
  }
}

/** Forgets the messages a newer compaction stands in for. */
function dropThrough(entry: Entry, seq: number): void {
  let cut = 0;
  while (cut < entry.rows.length && entry.rows[cut]!.message.seq <= seq) {
    entry.chars -= entry.rows[cut]!.chars;
    cut += 1;
  }
  entry.rows.splice(0, cut);
  entry.baseSeq = seq;
  entry.lastSeq = Math.max(entry.lastSeq, seq);
}
