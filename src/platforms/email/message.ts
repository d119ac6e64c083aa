/**
 * One mail as Keel reads it: who sent it, which thread it belongs to, the text a person wrote
 * (HTML read as text, the quoted history and the signature left out), its attachments, and
 * whether it is a message no one should answer (an auto-reply, a bounce, a list, our own).
 */
import { createHash } from "node:crypto";
import { type AddressObject, type ParsedMail, simpleParser } from "mailparser";
import type { InboundAttachment } from "../../contract/platform.js";

export interface EmailMessage {
  /** The Message-ID with its angle brackets; a hash of the raw mail when it has none. */
  messageId: string;
  /** The first message of the thread (References' first, else In-Reply-To, else its own). */
  root: string;
  /** Every id this message refers to, oldest first, then its own. */
  chain: string[];
  /** The message it answers (In-Reply-To, else the last of References). */
  inReplyTo: string | null;
  /** Answers an earlier message (In-Reply-To or References given). */
  isReply: boolean;
  /** The sender's address, lowercased; null when the mail names none. */
  from: string | null;
  fromName: string | null;
  subject: string;
  /** What the person wrote, without quoted history or signature. */
  text: string;
  attachments: InboundAttachment[];
  /** Why this mail must not be answered, or null. */
  noReply: string | null;
  /** The receiving server found the sender forged (DMARC, or both SPF and DKIM, failed). */
  forged: boolean;
}

/** Mail from these local parts is a machine's: never answered. */
const MACHINE_SENDERS = /^(mailer-daemon|postmaster|no-?reply|do-?not-?reply|bounces?)([+-].*)?$/i;

export async function readMessage(raw: Buffer, ownAddress: string): Promise<EmailMessage> {
  const mail = await simpleParser(raw, { skipImageLinks: true, skipTextLinks: true });
  const messageId = mail.messageId ?? `<${createHash("sha256").update(raw).digest("hex")}@keel>`;
  const references = asList(mail.references);
  const inReplyTo = mail.inReplyTo ? (mail.inReplyTo.match(/<[^>]+>/g) ?? []) : [];
  const before = references.length > 0 ? references : inReplyTo;
  const sender = firstAddress(mail.from);
  const from = sender?.address?.toLowerCase() ?? null;
  return {
    messageId,
    root: before[0] ?? messageId,
    chain: [...before, messageId],
    inReplyTo: inReplyTo[0] ?? references.at(-1) ?? null,
    isReply: before.length > 0,
    from,
    fromName: sender?.name || null,
    subject: mail.subject?.trim() ?? "",
    text: personalText(mail.text ?? ""),
    attachments: attachmentsOf(mail, messageId),
    noReply: whyNoReply(mail, from, ownAddress.toLowerCase()),
    forged: forged(mail),
  };
}

function asList(value: string | string[] | undefined): string[] {
  if (!value) return [];
  const joined = Array.isArray(value) ? value.join(" ") : value;
  return joined.match(/<[^>]+>/g) ?? [];
}

function firstAddress(from: AddressObject | undefined): { address?: string; name: string } | null {
  return from?.value[0] ?? null;
}

/** A header's raw value (unfolded), as written: the parser reshapes some headers into objects. */
function header(mail: ParsedMail, name: string): string {
  const line = mail.headerLines.find((h) => h.key === name)?.line ?? "";
  return line.slice(line.indexOf(":") + 1).replace(/\r?\n[ \t]+/g, " ");
}

/**
 * RFC 3834 and common practice: an automatic message (Auto-Submitted other than `no`, the
 * `X-Autoreply` family), bulk or list mail (`Precedence`, `List-Id`), a bounce (null return path,
 * a machine's sender), or a message from Keel's own address is never answered: answering one is
 * how two robots mail each other forever.
 */
function whyNoReply(mail: ParsedMail, from: string | null, own: string): string | null {
  if (!from) return "it names no sender";
  if (from === own) return "it is from Keel's own address";
  const autoSubmitted = header(mail, "auto-submitted").trim().toLowerCase();
  if (autoSubmitted && autoSubmitted !== "no") return `Auto-Submitted: ${autoSubmitted}`;
  const precedence = header(mail, "precedence").trim().toLowerCase();
  if (["bulk", "junk", "list", "auto_reply"].includes(precedence)) {
    return `Precedence: ${precedence}`;
  }
  for (const name of ["x-autoreply", "x-autorespond", "x-auto-response-suppress"]) {
    const value = header(mail, name).trim().toLowerCase();
    if (value && !(name === "x-auto-response-suppress" && !/all|autoreply|oof/.test(value))) {
      return `${name}: ${value}`;
    }
  }
  if (header(mail, "list-id") || header(mail, "list-unsubscribe")) return "it is list mail";
  if (header(mail, "return-path").trim() === "<>") return "it is a bounce (empty return path)";
  const local = from.split("@")[0] ?? "";
  if (MACHINE_SENDERS.test(local)) return `it is from ${from}, a machine`;
  return null;
}

/**
 * The topmost Authentication-Results (added by the receiving provider) says the From is forged:
 * `dmarc=fail`, or both `spf` and `dkim` failed. Absent or inconclusive: not forged.
 */
function forged(mail: ParsedMail): boolean {
  const results = mail.headers.get("authentication-results");
  const top = Array.isArray(results) ? results[0] : results;
  if (typeof top !== "string") return false;
  const verdict = (method: string) => new RegExp(`\\b${method}=(\\w+)`, "i").exec(top)?.[1];
  if (verdict("dmarc")?.toLowerCase() === "fail") return true;
  const spf = verdict("spf")?.toLowerCase();
  const dkim = verdict("dkim")?.toLowerCase();
  return spf === "fail" && dkim === "fail";
}

/** Lines that open a quoted earlier message in replies written by common mail programs. */
const QUOTE_OPENERS = [
  /^On .{3,200}wrote:\s*$/,
  /^Le .{3,200}a écrit\s*:\s*$/,
  /^Am .{3,200}schrieb .*:\s*$/,
  /^-{2,}\s*Original Message\s*-{2,}\s*$/i,
  /^-{2,}\s*Forwarded message\s*-{2,}\s*$/i,
  /^_{10,}\s*$/,
  /^From: .+$/,
];

/** The text above the quoted history and the signature, with quoted lines (`>`) dropped. */
export function personalText(text: string): string {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  const kept: string[] = [];
  for (const [index, line] of lines.entries()) {
    if (line === "-- " || line === "--") break;
    // "On Mon, X <a@b> wrote:" is often wrapped over two lines.
    const joined = `${line} ${lines[index + 1] ?? ""}`.trim();
    if (QUOTE_OPENERS.some((re) => re.test(line.trim()))) break;
    if (/^On .{3,200}$/.test(line.trim()) && /wrote:\s*$/.test(joined) && !/wrote:/.test(line)) {
      if ((lines[index + 2] ?? "").startsWith(">")) break;
    }
    if (line.startsWith(">")) continue;
    kept.push(line);
  }
  return kept
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

/** Files sent with the mail, as references the adapter fetches from the stored mail later. */
function attachmentsOf(mail: ParsedMail, messageId: string): InboundAttachment[] {
  return mail.attachments
    .filter((a) => a.contentDisposition === "attachment" || !a.related)
    .map((a, index) => ({
      kind: a.contentType.startsWith("image/")
        ? ("photo" as const)
        : a.contentType.startsWith("audio/")
          ? ("audio" as const)
          : ("document" as const),
      ref: JSON.stringify({ messageId, index }),
      ...(a.filename && { name: a.filename }),
      mime: a.contentType,
      size: a.size,
    }));
}

/** The attachments of a raw mail, in the order {@link attachmentsOf} numbers them. */
export async function attachmentBytes(raw: Buffer, index: number): Promise<Buffer | null> {
  const mail = await simpleParser(raw);
  const files = mail.attachments.filter((a) => a.contentDisposition === "attachment" || !a.related);
  return files[index]?.content ?? null;
}
