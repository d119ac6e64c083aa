/** The parsed-transcript cache the SQLite store keeps between turns. */
import { describe, expect, it } from "vitest";
import type { StoredMessage } from "./store.js";
import { type SizedMessage, TranscriptCache } from "./transcript-cache.js";

/** A stand-in transcript table: rows by seq, and a log of the `seq` each read started after. */
function table(chars = 10) {
  const rows: StoredMessage[] = [];
  const readsAfter: number[] = [];
  return {
    rows,
    readsAfter,
    add(seq: number, content = `m${seq}`) {
      rows.push({ seq, turnId: 1, message: { role: "user", content }, createdAt: seq });
    },
    readAfter: (seq: number): SizedMessage[] => {
      readsAfter.push(seq);
      return rows.filter((r) => r.seq > seq).map((message) => ({ message, chars }));
    },
  };
}

const seqs = (messages: StoredMessage[]) => messages.map((m) => m.seq);

describe("TranscriptCache", () => {
  it("reads only what was written since the last read, and returns the same objects", () => {
    const t = table();
    const cache = new TranscriptCache(10_000);
    t.add(1);
    t.add(2);
    const first = cache.read("s", 0, t.readAfter);
    t.add(5);
    const second = cache.read("s", 0, t.readAfter);
    expect(seqs(second)).toEqual([1, 2, 5]);
    expect(t.readsAfter).toEqual([0, 2]);
    expect(second[0]).toBe(first[0]);
    // The caller gets its own array: adding to it does not change what the cache holds.
    second.push(t.rows[0]!);
    expect(seqs(cache.read("s", 0, t.readAfter))).toEqual([1, 2, 5]);
  });

  it("drops what a newer compaction stands in for, and reads older rows apart", () => {
    const t = table();
    const cache = new TranscriptCache(10_000);
    for (const seq of [1, 2, 3, 4]) t.add(seq);
    cache.read("s", 0, t.readAfter);
    expect(seqs(cache.read("s", 2, t.readAfter))).toEqual([3, 4]);
    // A compaction through a seq not read yet: nothing up to it is fetched.
    t.add(6);
    t.add(7);
    expect(seqs(cache.read("s", 6, t.readAfter))).toEqual([7]);
    expect(t.readsAfter).toEqual([0, 4, 6]);
    // The whole transcript (a command, the control API) is read apart; the tail stays held.
    expect(seqs(cache.read("s", 0, t.readAfter))).toEqual([1, 2, 3, 4, 6, 7]);
    expect(t.readsAfter.at(-1)).toBe(0);
    t.add(8);
    expect(seqs(cache.read("s", 6, t.readAfter))).toEqual([7, 8]);
    expect(t.readsAfter.at(-1)).toBe(7);
  });

  it("keeps at most its budget of bytes, forgetting the session read longest ago", () => {
    const t = table(100); // 300 bytes a message with its objects
    const cache = new TranscriptCache(650);
    t.add(1);
    cache.read("a", 0, t.readAfter);
    cache.read("b", 0, t.readAfter);
    cache.read("a", 0, t.readAfter); // a is now the newest
    cache.read("c", 0, t.readAfter); // 900 > 650: b goes
    t.readsAfter.length = 0;
    cache.read("a", 0, t.readAfter);
    cache.read("b", 0, t.readAfter);
    expect(t.readsAfter).toEqual([1, 0]);
  });

  it("does not keep a transcript larger than the whole budget", () => {
    const t = table(100);
    const cache = new TranscriptCache(450);
    t.add(1);
    t.add(2);
    expect(seqs(cache.read("s", 0, t.readAfter))).toEqual([1, 2]);
    expect(seqs(cache.read("s", 0, t.readAfter))).toEqual([1, 2]);
    expect(t.readsAfter).toEqual([0, 0]);
  });

  it("counts the objects around each message, not only its body", () => {
    // 50 one-character messages: 50 characters of bodies, but ~10 KB of heap.
    const t = table(1);
    for (let seq = 1; seq <= 50; seq += 1) t.add(seq);
    const cache = new TranscriptCache(5_000);
    cache.read("s", 0, t.readAfter);
    cache.read("s", 0, t.readAfter);
    expect(t.readsAfter).toEqual([0, 0]);
  });
});
