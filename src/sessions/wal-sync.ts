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
 * An fsync that fails leaves the state of the file unknown (a later fsync may succeed without the
 * lost pages), so the gate stays failed: every call from then on rejects, and a restart reopens
 * the database from what the disk holds.
 */
import { close, fsync, openSync } from "node:fs";

export type FsyncFn = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

interface Waiter {
  /** Released once this many commits are durable. */
  upTo: number;
  resolve(): void;
  reject(err: unknown): void;
}

export class WalSync {
  private committed = 0;
  private durable = 0;
  private syncing = false;
  private failure: Error | null = null;
  private fd: number | null = null;
  private waiters: Waiter[] = [];

  constructor(
    private readonly walPath: string,
    private readonly fsyncFile: FsyncFn = fsync,
  ) {}

  /** Counts one commit (call right after it returned); `untilDurable` then waits for it. */
  committedOne(): void {
    this.committed += 1;
  }

  /**
   * Settles once everything committed so far is on disk; `undefined` when it already is (the
   * caller can answer at once, without a turn of the event loop).
   */
  untilDurable(): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    if (this.durable === this.committed) return undefined;
    const upTo = this.committed;
    const waiting = new Promise<void>((resolve, reject) => {
      this.waiters.push({ upTo, resolve, reject });
    });
    this.startSync();
    return waiting;
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
    let fd: number;
    try {
      // Opened at the first commit: SQLite creates the WAL file with its first write.
      this.fd ??= openSync(this.walPath, "r+");
      fd = this.fd;
    } catch (err) {
      this.fail(err);
      return;
    }
    this.syncing = true;
    const target = this.committed;
    this.fsyncFile(fd, (err) => {
      this.syncing = false;
      if (err) {
        this.fail(err);
        return;
      }
      this.durable = target;
      this.release();
      this.startSync();
    });
  }

  private release(): void {
    let released = 0;
    while (released < this.waiters.length && this.waiters[released]!.upTo <= this.durable) {
      this.waiters[released]!.resolve();
      released += 1;
    }
    this.waiters.splice(0, released);
  }

  private fail(err: unknown): void {
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
