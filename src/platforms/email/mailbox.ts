/**
 * One IMAP session on Keel's mailbox (imapflow): INBOX selected, its unseen messages read in UID
 * order, and a handled message marked `\Seen` and moved to the handled folder, which is the
 * mailbox's acknowledgement, given only once the message is stored. Between batches the session
 * waits in IDLE; news (EXISTS) ends the wait at once, and every `refreshMs` a NOOP proves the
 * server still answers: no answer within `noopTimeoutMs` is a stall, and the session is dropped.
 */
import { ImapFlow } from "imapflow";
import type { Logger } from "pino";

export interface MailboxSettings {
  host: string;
  port: number;
  user: string;
  password: string;
  /** TLS from the first byte; otherwise STARTTLS, required unless the host is loopback. */
  tls: boolean;
  /** Where a handled message is moved. */
  folder: string;
}

export interface MailboxTiming {
  /** IDLE is ended by a NOOP this often, which checks the connection. */
  refreshMs: number;
  noopTimeoutMs: number;
  connectTimeoutMs: number;
}

export interface FetchedMail {
  uid: number;
  source: Buffer;
}

/** The server stopped answering: the session is dropped and opened again. */
export class MailboxStalledError extends Error {}

/** The login was refused: no retry fixes that. */
export class MailboxAuthError extends Error {}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || host.startsWith("127.");
}

export class Mailbox {
  /** Set by EXISTS at any time: the next wait returns at once. */
  private news = false;
  private closed = false;
  private readonly closedSignal = new AbortController();

  private constructor(
    private readonly client: ImapFlow,
    private readonly settings: MailboxSettings,
    private readonly timing: MailboxTiming,
  ) {
    client.on("exists", () => {
      this.news = true;
      this.wake?.();
    });
    client.on("close", () => {
      this.closed = true;
      this.closedSignal.abort();
      this.wake?.();
    });
    // An error is followed by close; without a listener it would throw out of the event loop.
    client.on("error", () => {});
  }

  private wake: (() => void) | null = null;

  /** Connects, logs in, selects INBOX and makes sure the handled folder exists. */
  static async open(
    settings: MailboxSettings,
    timing: MailboxTiming,
    logger: Logger,
  ): Promise<Mailbox> {
    const client = new ImapFlow({
      host: settings.host,
      port: settings.port,
      secure: settings.tls,
      ...(!settings.tls && !isLoopback(settings.host) && { doSTARTTLS: true }),
      auth: { user: settings.user, pass: settings.password },
      logger: false,
      disableAutoIdle: true,
      connectionTimeout: timing.connectTimeoutMs,
      greetingTimeout: timing.connectTimeoutMs,
      // Longer than a refresh: the NOOP, not the socket timer, decides a stall.
      socketTimeout: 3 * (timing.refreshMs + timing.noopTimeoutMs),
    });
    const mailbox = new Mailbox(client, settings, timing);
    try {
      await client.connect();
    } catch (err) {
      client.close();
      const e = err as { authenticationFailed?: boolean; responseText?: string; message: string };
      if (e.authenticationFailed) {
        throw new MailboxAuthError(e.responseText || e.message || "authentication failed");
      }
      throw err;
    }
    try {
      await client.mailboxCreate(settings.folder).catch((err: { code?: string }) => {
        if (err.code !== "ALREADYEXISTS") throw err;
      });
      await client.mailboxOpen("INBOX");
    } catch (err) {
      client.close();
      throw err;
    }
    logger.debug({ folder: settings.folder }, "email mailbox open");
    return mailbox;
  }

  /** Aborts when the connection is gone. */
  get gone(): AbortSignal {
    return this.closedSignal.signal;
  }

  /** The unseen messages' UIDs, oldest first. */
  async unseen(): Promise<number[]> {
    this.news = false;
    const uids = await this.client.search({ seen: false }, { uid: true });
    return (uids || []).sort((a, b) => a - b);
  }

  /** The raw messages of `uids` (a batch: no other command may run while FETCH streams). */
  async fetch(uids: number[]): Promise<FetchedMail[]> {
    if (uids.length === 0) return [];
    const fetched = await this.client.fetchAll(
      uids.join(","),
      { uid: true, source: true },
      { uid: true },
    );
    return fetched
      .filter((m) => m.source)
      .map((m) => ({ uid: m.uid, source: m.source! }))
      .sort((a, b) => a.uid - b.uid);
  }

  /** The mailbox's acknowledgement: seen, then out of INBOX into the handled folder. */
  async done(uids: number[]): Promise<void> {
    if (uids.length === 0) return;
    const range = uids.join(",");
    await this.client.messageFlagsAdd(range, ["\\Seen"], { uid: true });
    await this.client.messageMove(range, this.settings.folder, { uid: true });
  }

  /**
   * Waits in IDLE until news arrives, `signal` aborts, or `refreshMs` passed; then a NOOP (which
   * also ends IDLE) must answer within `noopTimeoutMs`, else {@link MailboxStalledError}.
   */
  async waitForNews(signal: AbortSignal): Promise<void> {
    if (this.closed) throw new Error("the IMAP connection closed");
    if (!this.news) {
      const idling = this.client.idle().catch(() => {});
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.timing.refreshMs);
        const onAbort = () => resolve();
        signal.addEventListener("abort", onAbort, { once: true });
        this.wake = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
          resolve();
        };
        if (this.news || this.closed || signal.aborted) this.wake();
      });
      this.wake = null;
      if (signal.aborted || this.closed) {
        if (this.closed && !signal.aborted) throw new Error("the IMAP connection closed");
        return;
      }
      await this.noop();
      await idling;
      return;
    }
    await this.noop();
  }

  async noop(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new MailboxStalledError(
              `the IMAP server did not answer a NOOP within ${this.timing.noopTimeoutMs} ms`,
            ),
          ),
        this.timing.noopTimeoutMs,
      );
    });
    try {
      await Promise.race([this.client.noop(), timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Reads one message's raw source by its Message-ID, in `folder` or INBOX (a file's fetch). */
  async sourceByMessageId(messageId: string): Promise<Buffer | null> {
    for (const path of [this.settings.folder, "INBOX"]) {
      const lock = await this.client.getMailboxLock(path, { readOnly: true });
      try {
        const uids = await this.client.search(
          { header: { "message-id": messageId } },
          { uid: true },
        );
        const uid = (uids || [])[0];
        if (uid === undefined) continue;
        const message = await this.client.fetchOne(String(uid), { source: true }, { uid: true });
        if (message && typeof message === "object" && message.source) return message.source;
      } finally {
        lock.release();
      }
    }
    return null;
  }

  /** Drops the connection at once (a stall, a stop, a lease lost). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
  }

  /** Logs out politely, bounded in time. */
  async logout(): Promise<void> {
    if (this.closed) return;
    await Promise.race([
      this.client.logout().catch(() => {}),
      new Promise((resolve) => setTimeout(resolve, 2_000)),
    ]);
    this.close();
  }
}
