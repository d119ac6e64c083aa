/** What approvals say to people (cards, notices) and to the model (results of calls not run). */
import type { ApprovalDecision, ApprovalRecord } from "../sessions/store.js";

/** Platforms that show the question as a card with buttons (their adapters render approvalId). */
const WITH_BUTTONS = new Set(["telegram", "webchat"]);

/** Slack clients take a message starting with `/` for one of Slack's own commands: Keel's are `!`. */
const commandSigil = (platform: string | undefined) => (platform === "slack" ? "!" : "/");

export function questionText(record: ApprovalRecord, timeoutMs: number): string {
  const id = record.id;
  const platform = record.address?.platform;
  const c = commandSigil(platform);
  const how = `${c}approve ${id} (add "session" to allow this kind for the session) or ${c}deny ${id}`;
  return [
    `⚠️ Approval needed [${id}]: ${record.toolName} wants to run`,
    codeBlock(record.summary),
    `Why: ${record.reason}.`,
    `Answer with ${platform && WITH_BUTTONS.has(platform) ? `the buttons, or ${how}` : how}. Denied in ${duration(timeoutMs)} without an answer.`,
    `API: POST /api/approvals/${id} {"decision":"approve"} with the control token, or \`keel approvals approve ${id}\`.`,
  ].join("\n");
}

export function reaskText(record: ApprovalRecord, timeoutMs: number): string {
  return `⏳ Still waiting after a gateway restart.\n${questionText(record, timeoutMs)}`;
}

const DECIDED: Record<ApprovalDecision, string> = {
  approve: "✅ Approved once",
  approve_session: "✅ Approved for this session",
  deny: "🚫 Denied",
  timeout: "⌛ Timed out: not run",
  superseded: "🚫 Not run: a new message came first",
};

/** The card's text once decided: who decided what, on what. */
export function decidedText(record: ApprovalRecord): string {
  const what = DECIDED[record.decision ?? "deny"];
  const who = record.decidedBy && record.decision !== "timeout" ? ` by ${record.decidedBy}` : "";
  return `${what}${who} [${record.id}]\n${codeBlock(record.summary)}`;
}

/** The tool result the model gets for a call that was not run. */
export function notRunResult(record: ApprovalRecord, timeoutMs: number): string {
  switch (record.decision) {
    case "timeout":
      return `Not run: nobody approved this call within ${duration(timeoutMs)}, so it was denied. Continue without it, or ask the user.`;
    case "superseded":
      return "Not run: the user sent a new message instead of approving this call.";
    default:
      return `Not run: ${record.decidedBy ?? "the user"} denied this call. Do not try it again in another form; continue without it, or ask the user what to do.`;
  }
}

export function duration(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  return `${Math.round(s / 60)} min`;
}

export const NOTHING_WAITING = "Nothing is waiting for approval here.";
export const NOT_YOURS = "Only the person who asked, or an operator, can answer this approval.";
export const UNKNOWN_APPROVAL = (id: string) => `No approval has the id ${id}.`;

const FENCE = "`".repeat(3);

/** The command as a code block (Telegram and the web chat render it verbatim). */
function codeBlock(text: string): string {
  return `${FENCE}\n${text.replaceAll(FENCE, "'''")}\n${FENCE}`;
}
