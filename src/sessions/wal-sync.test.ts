import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { type FsyncFn, WalSync } from "./wal-sync.js";

/** An fsync stand-in (the system call, not our code): each flush waits until the test lets it finish. */
function heldFsync() {
  const flushes: (() => void)[] = [];
  const fsync: FsyncFn = (_fd, done) => flushes.push(() => done(null));
  return { fsync, flushes };
}

async function settled(promise: Promise<void> | undefined): Promise<boolean> {
  let done = promise === undefined;
  promise?.then(() => (done = true));
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("WalSync", () => {
  let dir: ReturnType<typeof createTempDir>;
  afterEach(() => dir.cleanup());

  it("answers a read once its commits are on disk, even behind a wait for a later commit", async () => {
    dir = createTempDir();
    const { fsync, flushes } = heldFsync();
    const wal = new WalSync(join(dir.path, "state.db-wal"), fsync);
    wal.committedOne();
    const first = wal.untilReadable();
    expect(flushes).toHaveLength(1);
    // A commit readers skip (a turn's start), then a wait that covers it (the checkpoint's), then
    // a read: the flush under way covers everything the read needs.
    wal.committedOne(false);
    const all = wal.untilDurable();
    const read = wal.untilReadable();
    flushes[0]!();
    expect(await settled(first)).toBe(true);
    expect(await settled(read)).toBe(true);
    expect(await settled(all)).toBe(false);
    expect(flushes).toHaveLength(2);
    flushes[1]!();
    expect(await settled(all)).toBe(true);
    await wal.close();
  });

  it("starts no flush for a commit nobody waits for, and the next wait covers it", async () => {
    dir = createTempDir();
    const { fsync, flushes } = heldFsync();
    const wal = new WalSync(join(dir.path, "state.db-wal"), fsync);
    wal.committedOne();
    // More callers than one turn of the event loop continues (wal-sync.ts): some are still
    // waiting, for nothing later, when the flush ends.
    const accepted = Array.from({ length: 10 }, () => wal.untilDurable());
    // A turn's start, committed while that flush is under way: nobody waits for it.
    wal.committedOne(false);
    flushes[0]!();
    for (const each of accepted) expect(await settled(each)).toBe(true);
    // Flushing it now would make the turn's finish, a moment later, wait for this flush first.
    expect(flushes).toHaveLength(1);
    wal.committedOne();
    const finished = wal.untilDurable();
    expect(flushes).toHaveLength(2);
    flushes[1]!();
    expect(await settled(finished)).toBe(true);
    await wal.close();
  });
});
