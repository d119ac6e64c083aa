/**
 * Mails per second through the email adapter: the built gateway (a child process) reading a
 * private Dovecot's mailbox with IMAP IDLE and answering through the test tree's SMTP server,
 * with a model that answers "ok" at once. Each sender writes again once their previous mail is
 * answered, so the latency is mail in -> reply accepted by SMTP (including the commit, the
 * `\Seen` flag and move, the turn, and the reply's SMTP transaction). Mail reaches the INBOX by
 * IMAP APPEND on one open session (a delivery agent per mail would measure process spawns).
 */
import { performance } from "node:perf_hooks";
import { ImapFlow } from "imapflow";
import MailComposer from "nodemailer/lib/mail-composer/index.js";
import { type PrivateDovecot, startPrivateDovecot } from "../test/helpers/private-dovecot.js";
import { type SmtpReceiver, startSmtpReceiver } from "../test/helpers/smtp-receiver.js";
import {
  allRepliesWithin,
  type MeasuredThroughput,
  type ThroughputOptions,
  type ThroughputResult,
  throughputFigures,
  withBenchGateway,
} from "./throughput.js";

export async function runEmailThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const dovecot = await startPrivateDovecot(["keel"]);
  const smtp = await startSmtpReceiver(null);
  const keel = dovecot.user("keel");
  const senders = Array.from({ length: options.chats }, (_, i) => `sender${i}@bench.test`);
  const imap = new ImapFlow({
    host: "127.0.0.1",
    port: dovecot.imapPort,
    secure: false,
    auth: { user: keel.user, pass: keel.password },
    logger: false,
    disableAutoIdle: true,
  });
  imap.on("error", () => {});
  await imap.connect();
  return withBenchGateway(
    options,
    {
      env: {
        EMAIL_IMAP_HOST: "127.0.0.1",
        EMAIL_IMAP_PORT: String(dovecot.imapPort),
        EMAIL_IMAP_USER: keel.user,
        EMAIL_IMAP_PASSWORD: keel.password,
        EMAIL_SMTP_HOST: "127.0.0.1",
        EMAIL_SMTP_PORT: String(smtp.port),
        EMAIL_ADDRESS: keel.address,
        EMAIL_ALLOWED_SENDERS: senders.join(","),
      },
      close: async () => {
        await imap.logout().catch(() => imap.close());
        await smtp.close();
        await dovecot.stop();
      },
    },
    (messages, gatewayRssMb) =>
      measure({ ...options, messages }, senders, { dovecot, smtp, imap }, gatewayRssMb),
  );
}

let sequence = 0;

async function measure(
  options: ThroughputOptions,
  senders: string[],
  servers: { dovecot: PrivateDovecot; smtp: SmtpReceiver; imap: ImapFlow },
  gatewayRssMb: () => number,
): Promise<MeasuredThroughput> {
  const perChat = Math.ceil(options.messages / senders.length);
  const total = perChat * senders.length;
  const sentAt = new Map<string, number>();
  const remaining = new Map(senders.map((s) => [s, perChat]));
  const latencies: number[] = [];
  const rssBefore = gatewayRssMb();
  let answered = 0;
  let finish: () => void = () => {};
  let fail: (err: Error) => void = () => {};
  const done = new Promise<void>((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  const send = async (sender: string) => {
    const left = remaining.get(sender) ?? 0;
    if (left <= 0) return;
    remaining.set(sender, left - 1);
    sequence += 1;
    const raw = await new MailComposer({
      from: sender,
      to: servers.dovecot.user("keel").address,
      subject: "",
      messageId: `<bench${sequence}@bench.test>`,
      text: `message ${left}`,
    })
      .compile()
      .build();
    sentAt.set(sender, performance.now());
    await servers.imap.append("INBOX", raw);
  };
  const unsubscribe = servers.smtp.onMail((mail) => {
    const sender = mail.to[0] ?? "";
    const start = sentAt.get(sender);
    if (start === undefined) return;
    sentAt.delete(sender);
    latencies.push(performance.now() - start);
    answered += 1;
    if (answered === total) finish();
    else send(sender).catch(fail);
  });
  const startedAt = performance.now();
  for (const sender of senders) await send(sender);
  try {
    await allRepliesWithin(done, options.timeoutMs, () => ({ answered, total }));
  } finally {
    unsubscribe();
  }
  return throughputFigures({
    total,
    chats: senders.length,
    startedAt,
    latencies,
    rssBefore,
    rssAfter: gatewayRssMb(),
  });
}
