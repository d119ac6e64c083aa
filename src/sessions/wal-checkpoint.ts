/**
 * Copies the WAL back into the database file (a checkpoint) without the event loop waiting on the
 * disk. SQLite's automatic checkpoint runs inside the commit that crosses its mark, with two
 * fsyncs (the WAL's, then the database file's) on the main thread: under load one came every few
 * hundred milliseconds and held the loop for 5-20 ms each time. The store turns it off
 * (`wal_autocheckpoint = 0`) and runs this one after commits instead:
 *
 * 1. the store holds its next commits (they queue; the event loop goes on) until step 3 is done,
 *    so that the copy catches up with the WAL and the next commit can start it over;
 * 2. every frame it may copy is on disk first: the WAL gate (wal-sync.ts) has flushed every
 *    commit made so far, this connection's and, by `data_version`, other connections';
 * 3. a second connection's read transaction, begun before the copy, pins the WAL: while it is
 *    open, no connection (this one or a `keel` command's) restarts the WAL over frames the
 *    database file may not hold on disk yet, and the copy stops at the frames it had seen. The
 *    copy runs with `synchronous = OFF` (no fsync inside); the database file is then flushed on
 *    libuv's thread pool, and only then is the pin released and are commits resumed.
 *
 * So a power cut at any point finds every copied page either durable in the database file or
 * still in a durable WAL frame, as with SQLite's own checkpoint. What stays on the main thread is
 * the copy into the OS's page cache, a few milliseconds for the pages of a few hundred commits.
 */
import { closeSync, fsync, fsyncSync, openSync } from "node:fs";
import type Database from "better-sqlite3";
import type { FsyncFn, WalSync } from "./wal-sync.js";

/**
 * WAL frames (pages written) between checkpoints. Measured under the bench's 50 concurrent
 * sessions: at 1,000 (SQLite's default) commits were held 2.7 s in all for 326 checkpoints of
 * ~1.5 ms copying each; at 4,000, 0.9 s for 84 of ~2.4 ms (a page rewritten between two
 * checkpoints is copied once).
 */
export const CHECKPOINT_FRAMES = 4000;
/** Commits before the first checkpoint; later, as many as made CHECKPOINT_FRAMES last time. */
const FIRST_AFTER_COMMITS = 100;
/** The fewest commits between two checkpoints, whatever the estimate says. */
const MIN_COMMITS = 10;

export interface WalCheckpointOptions {
  /** The store's connection (the one that writes). */
  db: Database.Database;
  /** The pinning connection, read-only, on the same file. */
  pin: Database.Database;
  /** The database file, flushed after each copy. */
  path: string;
  wal: WalSync;
  /**
   * Settles once every commit so far, this connection's and other connections', is on disk;
   * `undefined` when that is so already.
   */
  untilFlushed(): Promise<void> | undefined;
  /** Called when commits held during a checkpoint may go on. */
  resumeCommits(): void;
  fsyncFile?: FsyncFn;
}

export class WalCheckpoint {
  private commitsSince = 0;
  private every = FIRST_AFTER_COMMITS;
  private running: Promise<void> | null = null;
  private closed = false;
  private readonly fd: number;
  private readonly beginPin: Database.Statement;
  private readonly checkpoint: Database.Statement;

  constructor(private readonly options: WalCheckpointOptions) {
    this.fd = openSync(options.path, "r+");
    // A process killed between a copy and its flush of state.db left the WAL marked as copied
    // (in -shm, which another open connection keeps): this store's first commit could start the
    // WAL over pages only the OS holds. Flushed once here, before any commit.
    fsyncSync(this.fd);
    // Reading the schema page starts the pin's read transaction (BEGIN alone defers it).
    this.beginPin = options.pin.prepare("SELECT count(*) FROM sqlite_schema").pluck();
    this.checkpoint = options.db.prepare("PRAGMA wal_checkpoint(PASSIVE)");
  }

  /** True while the store must not commit (see step 1 above). */
  get holdsCommits(): boolean {
    return this.running !== null;
  }

  /** Counts a commit of the store's connection; starts a checkpoint once enough have gathered. */
  afterCommit(): void {
    this.commitsSince += 1;
    if (this.running || this.closed || this.commitsSince < this.every) return;
    if (this.options.wal.failed) return;
    // A failure is the WAL gate's (failed before or by this run): every store call reports it.
    this.running = this.run()
      .catch(() => undefined)
      .finally(() => {
        this.running = null;
        this.options.resumeCommits();
      });
  }

  /** Waits for a checkpoint under way, then closes the pin; starts no other. */
  async close(): Promise<void> {
    this.closed = true;
    await this.running;
    this.options.pin.close();
  }

  /**
   * Closes the database file's handle: only after the store's connection is closed, since closing
   * any handle on a file drops the process's POSIX locks on it, SQLite's included.
   */
  release(): void {
    closeSync(this.fd);
  }

  private async run(): Promise<void> {
    // Commits made while waiting need their flush too; each try waits for one more.
    let flushed = this.options.untilFlushed();
    for (let tries = 0; tries < 3; tries += 1) {
      await flushed;
      let pinned = false;
      let keepPin = false;
      try {
        this.options.pin.exec("BEGIN");
        pinned = true;
        this.beginPin.get();
        // Another commit may have come between the flush and the pin: copy only flushed frames.
        flushed = this.options.untilFlushed();
        if (flushed) continue;
        const [result] = this.copy();
        this.adjust(result);
        try {
          await this.flushDatabaseFile();
        } catch (err) {
          // state.db's pages on disk are unknown: nothing more may be answered, and the pin
          // stays, so that no connection starts the WAL over the only copy of those pages.
          keepPin = true;
          this.options.wal.fail(err);
        }
        return;
      } catch (err) {
        // A busy database (another connection recovering the WAL) is tried again later; any
        // other error from SQLite leaves the copy's state unknown.
        if ((err as { code?: unknown }).code !== "SQLITE_BUSY") this.options.wal.fail(err);
        return;
      } finally {
        if (pinned && !keepPin) this.options.pin.exec("COMMIT");
      }
    }
    // Out of tries under a stream of commits: the next commit starts another run. The last
    // flush is still awaited, so that its failure is heard here, not left unhandled.
    await flushed;
  }

  private copy(): Array<{ busy: number; log: number; checkpointed: number }> {
    const { db } = this.options;
    db.exec("PRAGMA synchronous = OFF");
    try {
      return this.checkpoint.all() as Array<{ busy: number; log: number; checkpointed: number }>;
    } finally {
      // NORMAL again at once: closing the last connection checkpoints with SQLite's own fsyncs.
      db.exec("PRAGMA synchronous = NORMAL");
    }
  }

  /**
   * Next time after as many commits as wrote CHECKPOINT_FRAMES frames this time (the WAL started
   * over after the previous checkpoint, so its frames are this interval's).
   */
  private adjust(result: { log: number } | undefined): void {
    const perCommit = result && result.log > 0 ? result.log / this.commitsSince : 0;
    if (perCommit > 0) {
      this.every = Math.max(MIN_COMMITS, Math.round(CHECKPOINT_FRAMES / perCommit));
    }
    this.commitsSince = 0;
  }

  private flushDatabaseFile(): Promise<void> {
    const fsyncFile = this.options.fsyncFile ?? fsync;
    return new Promise((resolve, reject) => {
      fsyncFile(this.fd, (err) => (err ? reject(err) : resolve()));
    });
  }
}
