/**
 * Email: Keel's own mailbox read over IMAP (mailbox.ts: IDLE, then the unseen messages in UID
 * order), replies sent over SMTP (nodemailer). A thread is a session. A message is marked seen and
 * moved to the handled folder only once it is committed to the inbox: a crash before that reads
 * it again, and the inbox's key (sender + Message-ID) stores it once.
 *
 * Who is answered: senders in `allowed_senders`/`admin_senders` and those an operator paired; a
 * stranger gets a pairing code by mail. Never answered, only filed away: auto-replies, bounces,
 * list and bulk mail, mail from Keel's own address, and mail the receiving server found forged.
 * Mail cannot be edited or show "typing", so a reply is sent once, when final.
 */
import { readFile } from "node:fs/promises";
import nodemailer, { type Transporter } from "nodemailer";
import type { Logger } from "pino";
import {
  FileTooLargeError,
  type InboundAttachment,
  type InboundMessage,
  type InboundSink,
  type OutboundReply,
  type PlatformAdapter,
} from "../../contract/platform.js";
import type { Store } from "../../sessions/store.js";
import { ChatAccess, type PairingAccess } from "../chat-access.js";
import {
  ConnectionState,
  type LeasedAdapterOptions,
  type SessionProgress,
} from "../kit/connection-state.js";
import { missingSetting } from "../kit/missing-setting.js";
import { answerByReply, approvalKey } from "./approval-reply.js";
import {
  composeReply,
  replySubject,
  type ThreadState,
  threadStateKey,
  trimChain,
} from "./compose.js";
import {
  type FetchedMail,
  isLoopback,
  Mailbox,
  MailboxAuthError,
  type MailboxSettings,
  type MailboxTiming,
} from "./mailbox.js";
import { attachmentBytes, type EmailMessage, readMessage } from "./message.js";

export type EmailStoreAccess = PairingAccess & Pick<Store, "getPlatformState" | "setPlatformState">;

export interface EmailTiming extends MailboxTiming {
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** How long start() waits for the first connection before returning (it goes on after). */
  startWaitMs: number;
  /** Messages read per FETCH. */
  batchSize: number;
}

export const DEFAULT_EMAIL_TIMING: EmailTiming = {
  refreshMs: 120_000,
  noopTimeoutMs: 30_000,
  connectTimeoutMs: 30_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  startWaitMs: 10_000,
  batchSize: 50,
};

export interface SmtpSettings {
  host: string;
  port: number;
  user?: string | undefined;
  password?: string | undefined;
  tls?: boolean | undefined;
}

export interface EmailAdapterOptions extends LeasedAdapterOptions<unknown> {
  imap: (Omit<MailboxSettings, "tls"> & { tls?: boolean | undefined }) | undefined;
  smtp: SmtpSettings | undefined;
  address: string | undefined;
  allowedSenders: string[];
  adminSenders: string[];
  store: EmailStoreAccess;
  timing?: Partial<EmailTiming>;
}

/** The largest file Keel attaches: most providers refuse mail over 25 MB, base64 adds a third. */
export const MAX_ATTACHMENT_BYTES = 18 * 1_048_576;

export function emailSessionKey(sender: string, root: string): string {
  return `agent:main:email:thread:${sender}:${root}`;
}

export class EmailAdapter implements PlatformAdapter {
  readonly name = "email";
  private readonly logger: Logger;
  private readonly timing: EmailTiming;
  private readonly health: ConnectionState;
  private readonly access: ChatAccess;
  private readonly transport: Transporter | null;
  private sink: InboundSink | null = null;
  private mailbox: Mailbox | null = null;

  constructor(private readonly options: EmailAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_EMAIL_TIMING, ...options.timing };
    this.health = new ConnectionState("email", options, this.timing, {
      // A NOOP answers every refresh; a standby holds no connection, so it is never stalled.
      stalledAfterMs: options.connection
        ? undefined
        : 2 * (this.timing.refreshMs + this.timing.noopTimeoutMs),
      crashLog: "email intake loop crashed",
      crashStatus: (err) => `Email stopped unexpectedly: ${describe(err)}`,
    });
    const lower = (list: string[]) => list.map((a) => a.toLowerCase());
    this.access = new ChatAccess(
      "email",
      lower(options.allowedSenders),
      options.store,
      lower(options.adminSenders),
    );
    const smtp = options.smtp;
    this.transport = smtp
      ? nodemailer.createTransport({
          host: smtp.host,
          port: smtp.port,
          secure: smtp.tls ?? smtp.port === 465,
          requireTLS: !(smtp.tls ?? smtp.port === 465) && !isLoopback(smtp.host),
          ...(smtp.user && { auth: { user: smtp.user, pass: smtp.password ?? "" } }),
          // A few connections kept open: no handshake and login per reply under load.
          pool: true,
          maxConnections: 3,
          connectionTimeout: this.timing.connectTimeoutMs,
          greetingTimeout: this.timing.connectTimeoutMs,
          socketTimeout: 60_000,
        })
      : null;
  }

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

  private get own(): string {
    return (this.options.address ?? "").toLowerCase();
  }

  async start(sink: InboundSink): Promise<void> {
    this.sink ??= sink;
    const missing = missingSetting(this.options, {
      imap: "platforms.email.imap (EMAIL_IMAP_HOST, _PORT, _USER, _PASSWORD)",
      smtp: "platforms.email.smtp (EMAIL_SMTP_HOST, EMAIL_SMTP_PORT)",
      address: "platforms.email.address (EMAIL_ADDRESS)",
    });
    const unconfigured = missing && `${missing} is not set; email needs it.`;
    await this.health.start((attempted) => this.run(attempted), unconfigured);
  }

  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    this.mailbox?.close();
    await this.health.loop;
    await this.options.connection?.release();
    this.transport?.close();
    this.health.set("stopped");
    this.logger.info("email stopped");
  }

  /** Sends one reply in its thread; throws when the SMTP server did not accept it. */
  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.transport || !this.options.address) {
      throw new Error("Email is not configured (platforms.email.smtp); the reply stays queued.");
    }
    const to = reply.address.chatId;
    const key = reply.address.threadId ? threadStateKey(to, reply.address.threadId) : null;
    const thread = key
      ? ((await this.options.store.getPlatformState(key)) as ThreadState | null)
      : null;
    const mail = composeReply(reply, thread, this.options.address);
    let text = reply.text;
    const attachments: { filename: string; content: Buffer; contentType: string }[] = [];
    if (reply.file) {
      const file = reply.file;
      if (file.size > MAX_ATTACHMENT_BYTES) {
        text = `${text ? `${text}\n\n` : ""}(I could not attach ${file.name}: at ${Math.round(file.size / 1_048_576)} MB it is larger than mail takes.)`;
      } else {
        attachments.push({
          filename: file.name,
          content: await readFile(file.path),
          contentType: file.mime,
        });
      }
    }
    if (reply.approvalId) {
      text = `${text}\n\nOr answer this mail with one word: approve, session (approve for this session) or deny.`;
      // The answer by reply (approval-reply.ts) finds the approval by the mail it answers.
      await this.options.store.setPlatformState(approvalKey(mail.messageId), reply.approvalId);
    }
    await this.transport.sendMail({
      from: this.options.address,
      to,
      subject: mail.subject,
      messageId: mail.messageId,
      ...(mail.inReplyTo && { inReplyTo: mail.inReplyTo }),
      ...(mail.references && { references: mail.references }),
      headers: mail.headers,
      text,
      attachments,
    });
    if (key && thread) {
      // Keel's own mail joins the chain, so the next reply in the thread names it too.
      await this.options.store.setPlatformState(key, {
        ...thread,
        chain: trimChain([...thread.chain, mail.messageId]),
      });
    }
  }

  /** A file a user attached: read again from the stored mail (the handled folder, or INBOX). */
  async fetchFile(attachment: InboundAttachment, maxBytes: number): Promise<Buffer> {
    if (attachment.size !== undefined && attachment.size > maxBytes) {
      throw new FileTooLargeError(maxBytes, attachment.size);
    }
    const { messageId, index } = JSON.parse(attachment.ref) as { messageId: string; index: number };
    const mailbox = this.mailbox;
    if (!mailbox) throw new Error("The mailbox is not connected; the file cannot be read now.");
    const raw = await mailbox.sourceByMessageId(messageId);
    if (!raw) throw new Error(`The mail ${messageId} is no longer in the mailbox.`);
    const bytes = await attachmentBytes(raw, index);
    if (!bytes) throw new Error(`The mail ${messageId} has no attachment ${index + 1}.`);
    if (bytes.length > maxBytes) throw new FileTooLargeError(maxBytes, bytes.length);
    return bytes;
  }

  private mailboxSettings(): MailboxSettings {
    const imap = this.options.imap!;
    return { ...imap, tls: imap.tls ?? imap.port === 993 };
  }

  /** Holds the mailbox (with the lease, when there is one) and reads it until stopped. */
  private run(firstAttempt: () => void): Promise<void> {
    return this.health.keepConnected(
      {
        // Only the lease's holder reads the mailbox.
        lease: this.options.connection,
        takenLog: "email mailbox lease taken: reading the mailbox",
        session: (held, progress) => this.readWhileHeld(held, progress),
        fatal: (err) => {
          if (!(err instanceof MailboxAuthError)) return false;
          this.health.fail(
            `The IMAP server refused the login (${err.message}). Check platforms.email.imap.user and password (EMAIL_IMAP_USER, EMAIL_IMAP_PASSWORD), then restart Keel.`,
            { retrying: false },
          );
          return true;
        },
        retryStatus: (err) => `Cannot read the mailbox over IMAP (${describe(err)}); retrying.`,
      },
      firstAttempt,
    );
  }

  /** Opens the mailbox and reads it until the hold is lost; closed when anything fails. */
  private async readWhileHeld(held: AbortSignal, progress: SessionProgress): Promise<void> {
    try {
      this.mailbox = await Mailbox.open(this.mailboxSettings(), this.timing, this.logger);
      const onLost = () => this.mailbox?.close();
      held.addEventListener("abort", onLost, { once: true });
      if (this.health.state !== "connected") this.logger.info("email connected (IMAP IDLE)");
      progress.connected();
      progress.healthy();
      await this.readUntilGone(this.mailbox, held);
      held.removeEventListener("abort", onLost);
    } catch (err) {
      this.mailbox?.close();
      throw err;
    } finally {
      this.mailbox = null;
    }
  }

  /** Batches of unseen mail, each stored before it is acknowledged; IDLE between them. */
  private async readUntilGone(mailbox: Mailbox, held: AbortSignal): Promise<void> {
    while (!held.aborted) {
      const uids = await mailbox.unseen();
      for (let i = 0; i < uids.length && !held.aborted; i += this.timing.batchSize) {
        const batch = await mailbox.fetch(uids.slice(i, i + this.timing.batchSize));
        await this.takeBatch(mailbox, batch);
        this.health.sawEvent();
      }
      if (held.aborted) return;
      await mailbox.waitForNews(held);
      this.health.sawEvent();
    }
  }

  /**
   * One batch: each sender's mail in order, senders side by side (their commits share flushes);
   * then the committed ones acknowledged at once. Throws after the acknowledgement when one was
   * not stored: the rest of that sender's mail stays unseen and is read again.
   */
  private async takeBatch(mailbox: Mailbox, batch: FetchedMail[]): Promise<void> {
    const read = await Promise.all(
      batch.map(async (fetched) => ({
        uid: fetched.uid,
        mail: await readMessage(fetched.source, this.own).catch((err: unknown) => {
          // A mail no parser reads would hold the mailbox forever: filed away, said in the log.
          this.logger.warn({ error: describe(err) }, "email not readable; filed away unanswered");
          return null;
        }),
      })),
    );
    const bySender = new Map<string, typeof read>();
    for (const item of read) {
      const key = item.mail?.from ?? "";
      bySender.set(key, [...(bySender.get(key) ?? []), item]);
    }
    const taken: number[] = [];
    const outcomes = await Promise.allSettled(
      [...bySender.values()].map(async (items) => {
        for (const { uid, mail } of items) {
          if (mail) await this.take(mail);
          taken.push(uid);
        }
      }),
    );
    // Only what is committed is acknowledged: the rest is read again.
    if (!mailbox.gone.aborted) await mailbox.done(taken.sort((a, b) => a - b));
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /** One mail: filed away, answered with a pairing code, an approval answer, or stored. */
  private async take(mail: EmailMessage): Promise<void> {
    if (mail.noReply) {
      this.logger.info({ from: mail.from, reason: mail.noReply }, "email not answered");
      return;
    }
    const from = mail.from!;
    if (mail.forged) {
      this.logger.warn({ from }, "email refused: the receiving server found the sender forged");
      return;
    }
    if (!(await this.access.isAllowed(from))) {
      const text = await this.access.pairingAnswer({
        userId: from,
        userName: mail.fromName,
        chatId: from,
      });
      this.logger.info({ from }, "email pairing requested");
      await this.sendDirect(from, mail, text).catch((err: unknown) =>
        this.logger.warn({ error: describe(err) }, "email pairing answer not sent"),
      );
      return;
    }
    const operator = this.access.isOperator(from);
    if (await this.answeredApproval(mail, operator)) return;
    const inbound: InboundMessage = {
      platform: "email",
      chatId: from,
      platformMessageId: mail.messageId,
      sessionKey: emailSessionKey(from, mail.root),
      text: messageText(mail),
      senderId: from,
      ...(mail.fromName && { senderName: mail.fromName }),
      address: {
        platform: "email",
        chatId: from,
        threadId: mail.root,
        replyToMessageId: mail.messageId,
      },
      ...(mail.attachments.length > 0 && { attachments: mail.attachments }),
      ...(operator && { operator: true }),
    };
    // The thread's subject and chain (for the reply's headers) go with the message, in the same
    // batch of commits: not one more flush before the message is stored.
    const thread: ThreadState = { subject: mail.subject, chain: trimChain(mail.chain) };
    await Promise.all([
      this.options.store.setPlatformState(threadStateKey(from, mail.root), thread),
      this.sink!.receive(inbound),
    ]);
  }

  /** A one-word answer to an approval question mail (approval-reply.ts). */
  private async answeredApproval(mail: EmailMessage, operator: boolean): Promise<boolean> {
    const answer = this.sink?.answerApproval;
    if (!answer) return false;
    const result = await answerByReply(mail, this.options.store, (press) =>
      answer.call(this.sink, { ...press, platform: "email", operator }),
    );
    if (!result) return false;
    await this.sendDirect(mail.from!, mail, result).catch((err: unknown) =>
      this.logger.warn({ error: describe(err) }, "email approval answer not sent"),
    );
    return true;
  }

  /** A mail outside the outbox (a pairing code, an approval's outcome), in the sender's thread. */
  private async sendDirect(to: string, mail: EmailMessage, text: string): Promise<void> {
    if (!this.transport) return;
    await this.transport.sendMail({
      from: this.options.address,
      to,
      subject: replySubject(mail.subject),
      inReplyTo: mail.messageId,
      references: trimChain(mail.chain),
      headers: { "Auto-Submitted": "auto-replied" },
      text,
    });
  }
}

/** What the runner reads: a new thread's subject first; a command (`/…`) alone. */
function messageText(mail: EmailMessage): string {
  const body = mail.text;
  if (body.startsWith("/") || !mail.subject) return body || mail.subject;
  if (mail.isReply) return body || mail.subject;
  return body ? `Subject: ${mail.subject}\n\n${body}` : mail.subject;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
