/**
 * Makes SQLite commits durable without the event loop waiting on the disk.
 *
 * The SQLite store runs with `synchronous=NORMAL`: a commit writes its pages to the WAL file (the
 * OS holds them, so a killed process loses nothing) but does not fsync it. This gate fsyncs the
 * WAL on libuv's thread pool and holds every promise the store returns, writes and reads alike,
 * until an fsync has covered every commit made before it: nothing a caller sees from the store
 * can be lost to a power cut, as with `synchronous=FULL`, but while the disk works the gateway
 * goes on with other sessions. Commits made while an fsync runs share the next one.
 *
 * A commit may be counted as not needed by readers (a turn's start, see turns/sqlite.ts):
 * nobody waits for it, and reads do not wait for it either; the next fsync any caller waits for
 * covers it, since an fsync of the WAL covers every commit written before it.
 *
 * An fsync that fails leaves the state of the file unknown (a later fsync may succeed without the
 * lost pages), so the gate stays failed: every call from then on rejects, and a restart reopens
 * the database from what the disk holds.
 */
import { close, closeSync, fsync, fsyncSync, openSync } from "node:fs";
import { dirname } from "node:path";

export type FsyncFn = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

interface Waiter {
  /** Released once this many commits are durable. */
  upTo: number;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * Callers continued per turn of the event loop once their commits are on disk. One fsync under
 * load covers dozens of waiting calls; continuing them all in one go held the loop for
 * milliseconds while every other socket waited.
 */
const RELEASED_PER_TURN = 8;

export class WalSync {
  private committed = 0;
  /** The latest commit a read must not answer from before it is durable. */
  private required = 0;
  private durable = 0;
  private syncing = false;
  private releaseScheduled = false;
  private failure: Error | null = null;
  private fd: number | null;
  private waiters: Waiter[] = [];

  /**
   * Opens `walPath` and flushes its folder once, as SQLite does for a WAL it creates: a WAL that
   * a power cut could unlink would take its flushed commits with it. The first fsync then covers
   * whatever an earlier process (or the migrations) committed without one.
   */
  constructor(
    walPath: string,
    private readonly fsyncFile: FsyncFn = fsync,
  ) {
    // Created (empty, which SQLite reads as a WAL with nothing in it) if SQLite has not yet: a new
    // database gets its WAL at its first write. Private, like the database file.
    this.fd = openSync(walPath, "a+", 0o600);
    const folder = openSync(dirname(walPath), "r");
    try {
      fsyncSync(folder);
    } finally {
      closeSync(folder);
    }
    this.committedOne();
  }

  /** Set once an fsync failed: nothing may be committed or answered from then on. */
  get failed(): Error | null {
    return this.failure;
  }

  /**
   * Counts one commit (call right after it returned); `untilDurable` then waits for it, and so
   * does `untilReadable` unless `readersWait` is false.
   */
  committedOne(readersWait = true): void {
    this.committed += 1;
    if (readersWait) this.required = this.committed;
  }

  /**
   * Settles once everything committed so far is on disk; `undefined` when it already is (the
   * caller can answer at once, without a turn of the event loop).
   */
  untilDurable(): Promise<void> | undefined {
    return this.until(this.committed);
  }

  /** Settles once every commit a read may not answer from early is on disk (see committedOne). */
  untilReadable(): Promise<void> | undefined {
    return this.until(this.required);
  }

  private until(upTo: number): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    if (this.durable >= upTo) return undefined;
    const waiting = new Promise<void>((resolve, reject) => {
      this.insertWaiter({ upTo, resolve, reject });
    });
    this.startSync();
    return waiting;
  }

  /**
   * Keeps the waiters in `upTo` order (call order among equals), which `release` relies on: a
   * read waits only for commits readers need, so it may need less than a write queued before it
   * (the checkpoint's wait covers commits readers skip) and must not wait behind it.
   */
  private insertWaiter(waiter: Waiter): void {
    let at = this.waiters.length;
    while (at > 0 && this.waiters[at - 1]!.upTo > waiter.upTo) at -= 1;
    this.waiters.splice(at, 0, waiter);
  }

  /** Waits for the fsync in flight (if any), then closes the WAL file. */
  async close(): Promise<void> {
    await this.untilDurable()?.catch(() => undefined);
    if (this.fd !== null) {
      const fd = this.fd;
      this.fd = null;
      await new Promise<void>((resolve) => close(fd, () => resolve()));
    }
  }

  private startSync(): void {
    if (this.syncing || this.failure || this.durable === this.committed) return;
    if (this.fd === null) {
      this.fail(new Error("the WAL file is closed"));
      return;
    }
    this.syncing = true;
    const target = this.committed;
    try {
      this.fsyncFile(this.fd, (err) => {
        this.syncing = false;
        if (err) {
          this.fail(err);
          return;
        }
        this.durable = target;
        this.release();
        // Only for a caller still waiting on a later commit (the waiters are in `upTo` order): a
        // commit nobody waits for (a turn's start) is covered by the next fsync someone does
        // wait for, and syncing it now would make that caller wait for this fsync, then its own.
        const last = this.waiters[this.waiters.length - 1];
        if (last && last.upTo > this.durable) this.startSync();
      });
    } catch (err) {
      this.syncing = false;
      this.fail(err);
    }
  }

  private release(): void {
    let released = 0;
    while (
      released < RELEASED_PER_TURN &&
      released < this.waiters.length &&
      this.waiters[released]!.upTo <= this.durable
    ) {
      this.waiters[released]!.resolve();
      released += 1;
    }
    this.waiters.splice(0, released);
    const more = this.waiters[0] !== undefined && this.waiters[0].upTo <= this.durable;
    if (more && !this.releaseScheduled) {
      this.releaseScheduled = true;
      setImmediate(() => {
        this.releaseScheduled = false;
        this.release();
      });
    }
  }

  /** Fails the gate (an fsync failed, here or of the database file after a checkpoint). */
  fail(err: unknown): void {
    const reason = err instanceof Error ? err.message : String(err);
    this.failure = new Error(
      `state.db could not be flushed to disk (${reason}); what was written since the last flush may be lost: restart the gateway`,
      { cause: err },
    );
    const waiters = this.waiters;
    this.waiters = [];
    for (const waiter of waiters) waiter.reject(this.failure);
  }
}
