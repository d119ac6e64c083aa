/**
 * The mail Keel sends in a thread: `Re:` on the thread's subject, `In-Reply-To` the message it
 * answers and `References` the thread's chain (so every mail program files it in the thread),
 * a Message-ID made from the outbox row (a resend after a crash carries the same id, which mail
 * programs and providers recognise), `Auto-Submitted: auto-replied` (RFC 3834: other robots do
 * not answer it), and nothing quoted: the person has the thread already.
 */
import { createHash } from "node:crypto";
import type { OutboundReply } from "../../contract/platform.js";

/** What Keel remembers of a thread to answer in it (kept in the store's platform state). */
export interface ThreadState {
  subject: string;
  /** The thread's ids, oldest first, ending with the latest message received. */
  chain: string[];
}

/** References keep the root and the latest ids: long threads would grow the header forever. */
const MAX_REFERENCES = 20;

export function threadStateKey(address: string, root: string): string {
  return `email:thread:${address}:${root}`;
}

/** `Re: <subject>`, without stacking `Re: Re:`. */
export function replySubject(subject: string): string {
  const bare = subject.replace(/^((re|aw|sv|antw)\s*:\s*)+/i, "").trim();
  return bare ? `Re: ${bare}` : "Re: your message";
}

export function trimChain(chain: string[]): string[] {
  if (chain.length <= MAX_REFERENCES) return chain;
  return [chain[0]!, ...chain.slice(-(MAX_REFERENCES - 1))];
}

/** The reply's Message-ID: the same for every attempt at one outbox row. */
export function replyMessageId(reply: OutboundReply, ownAddress: string): string {
  const domain = ownAddress.split("@")[1] ?? "keel.invalid";
  const hash = createHash("sha256")
    .update(`${reply.address.chatId}\n${reply.address.threadId ?? ""}\n${reply.sessionId}`)
    .digest("hex")
    .slice(0, 16);
  return `<keel.${reply.outboxId}.${hash}@${domain}>`;
}

export interface ComposedMail {
  subject: string;
  messageId: string;
  inReplyTo?: string;
  references?: string[];
  headers: Record<string, string>;
}

export function composeReply(
  reply: OutboundReply,
  thread: ThreadState | null,
  ownAddress: string,
): ComposedMail {
  const answered = reply.address.replyToMessageId ?? thread?.chain.at(-1);
  const chain = thread ? trimChain(thread.chain) : answered ? [answered] : [];
  return {
    subject: thread ? replySubject(thread.subject) : "A message from Keel",
    messageId: replyMessageId(reply, ownAddress),
    ...(answered && { inReplyTo: answered }),
    ...(chain.length > 0 && { references: chain }),
    headers: { "Auto-Submitted": "auto-replied", "X-Keel-Outbox": String(reply.outboxId) },
  };
}
