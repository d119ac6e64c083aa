/**
 * The Discord gateway session, kept in the store so that a restarted Keel RESUMEs (Discord then
 * replays what was sent meanwhile) instead of identifying again.
 *
 * @discordjs/ws asks for the session through `retrieveSessionInfo` on every connect and
 * heartbeat and reports it through `updateSessionInfo`, with the sequence of each dispatch
 * *before* the dispatch is handled. The sequence kept here only moves once the adapter has
 * committed that dispatch (`commit`), so a crash at any point resumes from an event whose effects
 * are stored: events after it are replayed and the inbox drops the ones already stored.
 *
 * Identifies are counted in the store too: Discord allows 1000 a day and resets the bot token
 * when they run out, so `IdentifyBudget` spaces them out and refuses past a daily cap.
 */
import type { IIdentifyThrottler, SessionInfo } from "@discordjs/ws";
import type { Logger } from "pino";
import { backoffMs } from "../../lib/net.js";
import type { PlatformDataStore } from "../../sessions/store.js";

export type PlatformStateStore = PlatformDataStore;

const SESSION_KEY = "discord:gateway";
const IDENTIFY_KEY = "discord:identifies";
const DAY_MS = 86_400_000;

interface StoredSession {
  sessionId: string;
  resumeURL: string;
  sequence: number;
  shardCount: number;
  /** When the last committed event arrived: where a catch-up without a cursor starts. */
  lastEventAt: number;
}

function isStoredSession(value: unknown): value is StoredSession {
  const v = value as Partial<StoredSession> | null;
  return (
    typeof v?.sessionId === "string" &&
    typeof v.resumeURL === "string" &&
    typeof v.sequence === "number" &&
    typeof v.shardCount === "number"
  );
}

export class DiscordGatewaySession {
  private session: StoredSession | null = null;
  private writing: Promise<void> | null = null;
  private dirty = false;
  /** The stored session Keel last lost (invalidated or forgotten), until a new one is ready. */
  private lostAt: number | null = null;

  constructor(
    private readonly store: PlatformStateStore,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Reads the stored session (if any): the next connect resumes it. */
  async load(): Promise<void> {
    const stored = await this.store.getPlatformState(SESSION_KEY);
    this.session = isStoredSession(stored) ? stored : null;
    if (this.session) {
      this.logger.info(
        { sessionId: this.session.sessionId, sequence: this.session.sequence },
        "discord session found: resuming",
      );
    }
  }

  get current(): Readonly<StoredSession> | null {
    return this.session;
  }

  /** For `retrieveSessionInfo`: the session with the last committed sequence. */
  retrieve(shardId: number): SessionInfo | null {
    const s = this.session;
    if (!s) return null;
    return {
      sessionId: s.sessionId,
      resumeURL: s.resumeURL,
      sequence: s.sequence,
      shardCount: s.shardCount,
      shardId,
    };
  }

  /**
   * For `updateSessionInfo`. A new session id (READY) is stored at once, with READY's sequence;
   * for the current session the library's sequence is ignored (see `commit`). Null forgets the
   * session (the adapter does not pass on the null of a connection it closed itself).
   */
  async update(info: SessionInfo | null): Promise<void> {
    if (info === null) {
      if (!this.session) return;
      this.logger.warn({ sessionId: this.session.sessionId }, "discord session lost");
      this.lostAt = this.session.lastEventAt;
      this.session = null;
      await this.persist();
      return;
    }
    if (this.session?.sessionId === info.sessionId) {
      if (info.resumeURL !== this.session.resumeURL) {
        this.session.resumeURL = info.resumeURL;
        await this.persist();
      }
      return;
    }
    this.session = {
      sessionId: info.sessionId,
      resumeURL: info.resumeURL,
      sequence: info.sequence,
      shardCount: info.shardCount,
      lastEventAt: this.now(),
    };
    await this.persist();
  }

  /** The dispatch with sequence `seq` is handled and its effects committed. */
  commit(seq: number | null): void {
    const s = this.session;
    if (!s || seq === null || seq <= s.sequence) return;
    s.sequence = seq;
    s.lastEventAt = this.now();
    void this.persist().catch((err: unknown) => {
      this.logger.warn({ err }, "discord session sequence not stored");
    });
  }

  /**
   * When the session was lost and not yet replaced by a new READY, the time of its last
   * committed event (messages after it may have been missed); null otherwise. Reading clears it.
   */
  takeLoss(): number | null {
    const at = this.lostAt;
    this.lostAt = null;
    return at;
  }

  /** Resolves once the latest state is written. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** Writes the current state; concurrent calls coalesce into one more write at most. */
  private persist(): Promise<void> {
    if (this.writing) {
      this.dirty = true;
      return this.writing;
    }
    const run = async () => {
      do {
        this.dirty = false;
        await this.store.setPlatformState(SESSION_KEY, this.session ? { ...this.session } : null);
      } while (this.dirty);
    };
    this.writing = run().finally(() => {
      this.writing = null;
    });
    return this.writing;
  }
}

export interface IdentifyBudgetOptions {
  /** Identifies allowed in 24 h (Discord's hard limit is 1000 and resets the token). */
  maxPerDay: number;
  /** Wait before an identify that follows another; doubles with each identify in the last 10 min. */
  spacingMs: number;
  maxSpacingMs: number;
  /** Told when the daily budget is used up (and when it is available again: null). */
  onExhausted(message: string | null): void;
  /** Told while an identify waits for its turn (a watchdog must not count that as silence). */
  onWait?(waiting: boolean): void;
}

/** Identify throttling with a durable count of the identifies of the last 24 hours. */
export class IdentifyBudget implements IIdentifyThrottler {
  constructor(
    private readonly store: PlatformStateStore,
    private readonly options: IdentifyBudgetOptions,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Identifies in the last 24 hours, oldest first. */
  async recent(): Promise<number[]> {
    const stored = await this.store.getPlatformState(IDENTIFY_KEY);
    const times = Array.isArray(stored) ? stored.filter((t) => typeof t === "number") : [];
    const since = this.now() - DAY_MS;
    return times.filter((t) => t > since);
  }

  async waitForIdentify(_shardId: number, signal: AbortSignal): Promise<void> {
    this.options.onWait?.(true);
    try {
      await this.waitForTurn(signal);
    } finally {
      this.options.onWait?.(false);
    }
  }

  private async waitForTurn(signal: AbortSignal): Promise<void> {
    let times = await this.recent();
    while (times.length >= this.options.maxPerDay) {
      const freeAt = times[0]! + DAY_MS;
      const message = `Discord identify budget used up (${times.length} in 24 h); waiting until ${new Date(freeAt).toISOString()} so Discord does not reset the bot token.`;
      this.options.onExhausted(message);
      await sleep(freeAt - this.now(), signal);
      times = await this.recent();
    }
    this.options.onExhausted(null);
    const last = times.at(-1);
    if (last !== undefined) {
      const burst = times.filter((t) => t > this.now() - 600_000).length;
      // No jitter: the spacing is Discord's floor, never to be undercut.
      const spacing = backoffMs(burst, this.options.spacingMs, this.options.maxSpacingMs);
      const wait = last + spacing - this.now();
      if (wait > 0) await sleep(wait, signal);
    }
    times.push(this.now());
    await this.store.setPlatformState(IDENTIFY_KEY, times);
    this.logger.info({ identifiesIn24h: times.length }, "discord identify");
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
