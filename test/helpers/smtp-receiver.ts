/**
 * An SMTP server in the test tree (the `smtp-server` package) standing in for the mail provider's
 * submission server: it takes what Keel sends (AUTH PLAIN/LOGIN, no TLS on 127.0.0.1), keeps
 * every message it accepted, and hands each to a private Dovecot's delivery agent, so a reply can
 * be read back over IMAP from the recipient's mailbox. It can refuse the next messages with a
 * temporary failure (421/451), as a provider's rate limit does.
 */
import { simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";
import type { PrivateDovecot } from "./private-dovecot.js";

export interface ReceivedMail {
  at: number;
  from: string;
  to: string[];
  raw: Buffer;
  /** Refused with a temporary failure instead of accepted. */
  refused: boolean;
  /** The text part as the recipient reads it (parsed on arrival). */
  text: string;
  messageId: string;
}

export interface SmtpReceiver {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  /** Every message offered, accepted or refused, oldest first. */
  readonly mails: ReceivedMail[];
  /** Calls `listener` with each accepted mail; returns the unsubscribe. */
  onMail(listener: (mail: ReceivedMail) => void): () => void;
  /** Refuses the next `count` messages with `451 4.7.1` (try again later). */
  refuseNext(count?: number): void;
  close(): Promise<void>;
}

export async function startSmtpReceiver(dovecot: PrivateDovecot | null): Promise<SmtpReceiver> {
  const mails: ReceivedMail[] = [];
  const user = "keel-smtp";
  const password = "smtp-secret";
  let refuse = 0;
  const listeners = new Set<(mail: ReceivedMail) => void>();
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ["STARTTLS"],
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === user && auth.password === password) callback(null, { user });
      else callback(new Error("535 5.7.8 authentication failed"));
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        const raw = Buffer.concat(chunks);
        const mail = await simpleParser(raw);
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : "";
        const to = session.envelope.rcptTo.map((r) => r.address);
        const refused = refuse > 0;
        const received: ReceivedMail = {
          at: Date.now(),
          from,
          to,
          raw,
          refused,
          text: (mail.text ?? "").trim(),
          messageId: mail.messageId ?? "",
        };
        mails.push(received);
        if (refused) {
          refuse -= 1;
          const err = new Error("Too many messages, try again later") as Error & {
            responseCode: number;
          };
          err.responseCode = 451;
          callback(err);
          return;
        }
        const local = dovecot ? to.filter((a) => a.endsWith(`@${dovecot.domain}`)) : [];
        const delivered = local.length > 0 ? dovecot!.deliver(raw, local, from) : Promise.resolve();
        delivered.then(
          () => {
            callback();
            for (const listener of listeners) listener(received);
          },
          (err: Error) => callback(err),
        );
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  // A client's connection failing (the gateway SIGKILLed mid-session resets it) reaches the server
  // as an "error" event, which would end the test process unheard: it is the client's end only.
  server.on("error", () => {});
  const address = server.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    port,
    user,
    password,
    mails,
    onMail(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    refuseNext(count = 1) {
      refuse += count;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
