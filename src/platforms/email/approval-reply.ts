/**
 * An approval answered by replying to its question mail with one word, mail's stand-in for the
 * buttons other platforms show: the question's Message-ID is remembered with its approval id when
 * it is sent, and a reply to it that says `approve`/`yes`, `session` or `deny`/`no` is pressed
 * as the button would be. `/approve <id>` and `/deny <id>` work by mail as on every platform.
 */
import type { ApprovalPress, ApprovalPressResult } from "../../contract/platform.js";
import type { Store } from "../../sessions/store.js";
import type { EmailMessage } from "./message.js";

export function approvalKey(messageId: string): string {
  return `email:approval:${messageId}`;
}

const WORDS: Record<string, ApprovalPress["decision"]> = {
  approve: "approve",
  approved: "approve",
  yes: "approve",
  ok: "approve",
  session: "approve_session",
  "approve session": "approve_session",
  deny: "deny",
  denied: "deny",
  no: "deny",
};

/** The decision a reply's first line says, or null when it says something else. */
export function decisionOf(text: string): ApprovalPress["decision"] | null {
  const first = (text.split("\n")[0] ?? "")
    .trim()
    .toLowerCase()
    .replace(/[.!]+$/, "");
  return WORDS[first] ?? null;
}

/**
 * Presses the approval `mail` answers, when it answers a question mail with a decision; returns
 * the text to mail back, or null when the mail is not such an answer (it is then a message).
 */
export async function answerByReply(
  mail: EmailMessage,
  store: Pick<Store, "getPlatformState">,
  press: (press: Omit<ApprovalPress, "platform" | "operator">) => Promise<ApprovalPressResult>,
): Promise<string | null> {
  const decision = decisionOf(mail.text);
  const answered = mail.inReplyTo;
  if (!decision || !answered || !mail.from) return null;
  const approvalId = await store.getPlatformState(approvalKey(answered));
  if (typeof approvalId !== "string") return null;
  const result = await press({
    approvalId,
    decision,
    userId: mail.from,
    ...(mail.fromName && { userName: mail.fromName }),
    chatId: mail.from,
  });
  return result.cardText ?? result.toast;
}
