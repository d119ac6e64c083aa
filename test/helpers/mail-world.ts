/**
 * A small mail world for the email tests: a private Dovecot holding Keel's mailbox (`keel`) and
 * its users' (`alice`, `bob`, `carol`), and an SMTP receiver that delivers what Keel sends into
 * those mailboxes. A user "writes" by a real local delivery into Keel's INBOX; what a user got
 * back is read over IMAP from their own mailbox.
 */
import { ImapFlow } from "imapflow";
import { simpleParser } from "mailparser";
import MailComposer from "nodemailer/lib/mail-composer/index.js";
import { type PrivateDovecot, startPrivateDovecot } from "./private-dovecot.js";
import { type SmtpReceiver, startSmtpReceiver } from "./smtp-receiver.js";

export interface OutgoingMail {
  from: string;
  subject?: string;
  text?: string;
  html?: string;
  inReplyTo?: string;
  references?: string[];
  headers?: Record<string, string>;
  attachments?: { filename: string; content: Buffer | string; contentType?: string }[];
  messageId?: string;
}

export interface SeenMail {
  messageId: string;
  inReplyTo: string | undefined;
  references: string[];
  subject: string;
  text: string;
  from: string;
  headers: Map<string, unknown>;
  attachments: { filename: string | undefined; content: Buffer }[];
}

export interface MailWorld {
  dovecot: PrivateDovecot;
  smtp: SmtpReceiver;
  keelAddress: string;
  /** The environment that turns email on in a gateway, pointed at this world. */
  env(allowed: string[], extra?: Record<string, string>): Record<string, string>;
  address(user: string): string;
  /** A user's mail arrives in Keel's INBOX (a real local delivery); resolves with it. */
  send(mail: OutgoingMail): Promise<{ messageId: string; raw: Buffer }>;
  /** Delivers a raw mail into Keel's INBOX again (a provider's redelivery, a restored copy). */
  redeliver(raw: Buffer): Promise<void>;
  /** What `user` has received, oldest first. */
  received(user: string): Promise<SeenMail[]>;
  /** The mail is marked seen and filed in Keel's handled folder (the mailbox's acknowledgement). */
  filed(messageId: string, folder?: string): Promise<boolean>;
  /** How many messages a folder of Keel's mailbox holds, and how many of them are unseen. */
  keelFolder(path: string): Promise<{ messages: number; unseen: number }>;
  close(): Promise<void>;
}

export async function startMailWorld(): Promise<MailWorld> {
  const dovecot = await startPrivateDovecot(["keel", "alice", "bob", "carol"]);
  const smtp = await startSmtpReceiver(dovecot);
  const keelAddress = dovecot.user("keel").address;
  let sent = 0;

  async function withMailbox<T>(user: string, work: (client: ImapFlow) => Promise<T>): Promise<T> {
    const u = dovecot.user(user);
    const client = new ImapFlow({
      host: "127.0.0.1",
      port: dovecot.imapPort,
      secure: false,
      auth: { user: u.user, pass: u.password },
      logger: false,
    });
    client.on("error", () => {});
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.logout().catch(() => client.close());
    }
  }

  return {
    dovecot,
    smtp,
    keelAddress,
    env: (allowed, extra = {}) => ({
      EMAIL_IMAP_HOST: "127.0.0.1",
      EMAIL_IMAP_PORT: String(dovecot.imapPort),
      EMAIL_IMAP_USER: "keel",
      EMAIL_IMAP_PASSWORD: dovecot.user("keel").password,
      EMAIL_SMTP_HOST: "127.0.0.1",
      EMAIL_SMTP_PORT: String(smtp.port),
      EMAIL_SMTP_USER: smtp.user,
      EMAIL_SMTP_PASSWORD: smtp.password,
      EMAIL_ADDRESS: keelAddress,
      EMAIL_ALLOWED_SENDERS: allowed.join(","),
      ...extra,
    }),
    address: (user) => dovecot.user(user).address,
    async send(mail) {
      sent += 1;
      const messageId = mail.messageId ?? `<m${sent}.${Date.now()}@${dovecot.domain}>`;
      const raw = await new MailComposer({
        from: mail.from,
        to: keelAddress,
        subject: mail.subject ?? "Hello",
        messageId,
        ...(mail.text !== undefined && { text: mail.text }),
        ...(mail.html !== undefined && { html: mail.html }),
        ...(mail.inReplyTo && { inReplyTo: mail.inReplyTo }),
        ...(mail.references && { references: mail.references }),
        ...(mail.headers && { headers: mail.headers }),
        ...(mail.attachments && { attachments: mail.attachments }),
      })
        .compile()
        .build();
      await dovecot.deliver(raw, [keelAddress], mail.from);
      return { messageId, raw };
    },
    redeliver: (raw) => dovecot.deliver(raw, [keelAddress]),
    received: (user) =>
      withMailbox(user, async (client) => {
        const lock = await client.getMailboxLock("INBOX");
        try {
          const status = await client.status("INBOX", { messages: true });
          if (typeof status !== "object" || !status.messages) return [];
          const fetched = await client.fetchAll("1:*", { source: true });
          const mails: SeenMail[] = [];
          for (const message of fetched) {
            const parsed = await simpleParser(message.source!);
            const refs = parsed.references;
            mails.push({
              messageId: parsed.messageId ?? "",
              inReplyTo: parsed.inReplyTo,
              references: Array.isArray(refs) ? refs : refs ? refs.split(/\s+/) : [],
              subject: parsed.subject ?? "",
              text: (parsed.text ?? "").trim(),
              from: parsed.from?.value[0]?.address ?? "",
              headers: parsed.headers as Map<string, unknown>,
              attachments: parsed.attachments.map((a) => ({
                filename: a.filename,
                content: a.content,
              })),
            });
          }
          return mails;
        } finally {
          lock.release();
        }
      }),
    filed: (messageId, folder = "Keel") =>
      withMailbox("keel", async (client) => {
        const lock = await client.getMailboxLock(folder).catch(() => null);
        if (!lock) return false;
        try {
          const uids = await client.search({ header: { "message-id": messageId }, seen: true });
          return Array.isArray(uids) && uids.length > 0;
        } finally {
          lock.release();
        }
      }),
    keelFolder: (path) =>
      withMailbox("keel", async (client) => {
        const status = await client
          .status(path, { messages: true, unseen: true })
          .catch(() => false);
        if (typeof status !== "object") return { messages: 0, unseen: 0 };
        return { messages: status.messages ?? 0, unseen: status.unseen ?? 0 };
      }),
    async close() {
      await smtp.close();
      await dovecot.stop();
    },
  };
}
