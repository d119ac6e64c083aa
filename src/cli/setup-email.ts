/**
 * The email step of `keel setup`: Keel's own mailbox (its address, the IMAP server it reads and
 * the SMTP server it sends through), each login tested before anything is written, and the
 * `platforms.email` block of config.yaml. Skipped on an empty address.
 */
import { probeImap, probeSmtp } from "./email-probe.js";
import type { CliIo } from "./io.js";

/** What setup writes for email (platforms.email). */
export interface EmailAnswers {
  address: string;
  imap: { host: string; port: number; user: string; password: string };
  smtp: { host: string; port: number; user: string; password: string };
}

interface Asker {
  text(question: string, fallback: string): Promise<string>;
}

/** Guesses a provider's servers from the address's domain (imap.<domain>, smtp.<domain>). */
const domainOf = (address: string) => address.split("@")[1] ?? "";

export async function askEmail(ask: Asker, io: CliIo): Promise<EmailAnswers | null | "failed"> {
  const address = await ask.text(
    "Email address of a mailbox for Keel alone (it files away what it reads; empty to skip)",
    "",
  );
  if (!address) return null;
  const domain = domainOf(address);
  const imapHost = await ask.text("IMAP server", `imap.${domain}`);
  const imapPort = Number(await ask.text("IMAP port (993: TLS)", "993"));
  const imapUser = await ask.text("IMAP login", address);
  const imapPassword = await ask.text("IMAP password (an app password where offered)", "");
  const imap = { host: imapHost, port: imapPort, user: imapUser, password: imapPassword };
  const read = await probeImap(imap);
  if (!read.ok && !read.warnOnly) {
    io.err(`✗ ${read.detail}`);
    return "failed";
  }
  io.out(`${read.ok ? "✓" : "⚠"} ${read.detail}`);
  const smtpHost = await ask.text("SMTP server", `smtp.${domain}`);
  const smtpPort = Number(await ask.text("SMTP port (465: TLS, 587: STARTTLS)", "465"));
  const smtpUser = await ask.text("SMTP login", imapUser);
  const smtpPassword = await ask.text("SMTP password (empty: the IMAP one)", "");
  const smtp = {
    host: smtpHost,
    port: smtpPort,
    user: smtpUser,
    password: smtpPassword || imapPassword,
  };
  const send = await probeSmtp(smtp);
  if (!send.ok) {
    io.err(`✗ ${send.detail}`);
    return "failed";
  }
  io.out(`✓ ${send.detail}`);
  io.out("  Mail from addresses under platforms.email.allowed_senders is answered; anyone else");
  io.out(
    "  gets a pairing code (`keel pairing approve CODE`). Handled mail moves to the folder Keel.",
  );
  return { address, imap, smtp };
}

/** A double-quoted YAML scalar (JSON strings are valid YAML). */
const q = (value: string) => JSON.stringify(value);

export function renderEmail(email: EmailAnswers): string[] {
  const server = (s: EmailAnswers["imap"]) =>
    `{ host: ${q(s.host)}, port: ${s.port}, user: ${q(s.user)}, password: ${q(s.password)} }`;
  return [
    "  email:",
    `    address: ${q(email.address)}`,
    `    imap: ${server(email.imap)}`,
    `    smtp: ${server(email.smtp)}`,
    "    # Addresses that may write to Keel; others get a pairing code.",
    "    allowed_senders: []",
  ];
}
