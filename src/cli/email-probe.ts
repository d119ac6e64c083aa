/**
 * The email settings tested as the gateway will use them, for `keel doctor` and `keel setup`: an
 * IMAP login (and INBOX selected: IDLE is what Keel waits with, so its absence is said), and an
 * SMTP connection with its login. The libraries load only here, when email is configured. Each
 * answer names the server it tried, never the password.
 */
import { errorMessage } from "../lib/errors.js";
import type { ProbeResult } from "./endpoint-checks.js";

const TIMEOUT_MS = 10_000;

export interface MailServerAnswers {
  host: string;
  port: number;
  user?: string | undefined;
  password?: string | undefined;
  tls?: boolean | undefined;
}

const loopback = (host: string) =>
  host === "localhost" || host === "::1" || host.startsWith("127.");

export async function probeImap(imap: MailServerAnswers): Promise<ProbeResult> {
  const { ImapFlow } = await import("imapflow");
  const where = `IMAP ${imap.host}:${imap.port}`;
  const tls = imap.tls ?? imap.port === 993;
  const client = new ImapFlow({
    host: imap.host,
    port: imap.port,
    secure: tls,
    ...(!tls && !loopback(imap.host) && { doSTARTTLS: true }),
    auth: { user: imap.user ?? "", pass: imap.password ?? "" },
    logger: false,
    disableAutoIdle: true,
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: TIMEOUT_MS,
  });
  client.on("error", () => {});
  try {
    await client.connect();
    await client.mailboxOpen("INBOX", { readOnly: true });
    const idle = client.capabilities.has("IDLE");
    await client.logout();
    return idle
      ? { ok: true, detail: `${where}: ${imap.user} logged in, INBOX open, IDLE offered` }
      : {
          ok: false,
          warnOnly: true,
          detail: `${where}: logged in, but the server offers no IDLE: mail is noticed only at each check (every 2 minutes)`,
        };
  } catch (err) {
    client.close();
    const e = err as { authenticationFailed?: boolean; responseText?: string };
    if (e.authenticationFailed) {
      return {
        ok: false,
        detail: `${where} refused the login of ${imap.user}${e.responseText ? ` (${e.responseText})` : ""}: check platforms.email.imap.user and password (EMAIL_IMAP_USER, EMAIL_IMAP_PASSWORD)`,
      };
    }
    return { ok: false, detail: `${where} is unreachable (${errorMessage(err)})` };
  }
}

export async function probeSmtp(smtp: MailServerAnswers): Promise<ProbeResult> {
  const nodemailer = (await import("nodemailer")).default;
  const where = `SMTP ${smtp.host}:${smtp.port}`;
  const tls = smtp.tls ?? smtp.port === 465;
  const transport = nodemailer.createTransport({
    host: smtp.host,
    port: smtp.port,
    secure: tls,
    requireTLS: !tls && !loopback(smtp.host),
    ...(smtp.user && { auth: { user: smtp.user, pass: smtp.password ?? "" } }),
    connectionTimeout: TIMEOUT_MS,
    greetingTimeout: TIMEOUT_MS,
    socketTimeout: TIMEOUT_MS,
  });
  try {
    await transport.verify();
    return {
      ok: true,
      detail: `${where}: ${smtp.user ? `${smtp.user} logged in` : "accepts connections (no login)"}`,
    };
  } catch (err) {
    const e = err as { code?: string; response?: string };
    if (e.code === "EAUTH") {
      return {
        ok: false,
        detail: `${where} refused the login${e.response ? ` (${e.response})` : ""}: check platforms.email.smtp.user and password (EMAIL_SMTP_USER, EMAIL_SMTP_PASSWORD)`,
      };
    }
    return { ok: false, detail: `${where} is unreachable (${errorMessage(err)})` };
  } finally {
    transport.close();
  }
}

/** Both servers: the first failure, or one line naming both. */
export async function probeEmail(
  imap: MailServerAnswers,
  smtp: MailServerAnswers,
): Promise<ProbeResult> {
  const [read, send] = await Promise.all([probeImap(imap), probeSmtp(smtp)]);
  if (!read.ok && !read.warnOnly) return read;
  if (!send.ok) return send;
  if (!read.ok) return read;
  return { ok: true, detail: `${read.detail}; ${send.detail}` };
}
