/** What approvals say to people (cards, notices) and to the model (results of calls not run). */
import type { ApprovalDecision, ApprovalRecord } from "../sessions/store.js";
import { fitVisible, makeVisible } from "./visible-text.js";

/** Platforms that show the question as a card with buttons (their adapters render approvalId). */
const WITH_BUTTONS = new Set(["telegram", "webchat", "whatsapp"]);

/** Slack clients take a message starting with `/` for one of Slack's own commands: Keel's are `!`. */
const commandSigil = (platform: string | undefined) => (platform === "slack" ? "!" : "/");

/**
 * What one chat message holds, where a card must fit in one (Telegram 4096 UTF-16 units, Discord
 * 2000; Slack takes 40,000 but folds long messages away, so a card stays short there too;
 * WhatsApp's reply-button message holds 1024). The web chat and the API show any length.
 */
const CARD_LIMIT: Record<string, number> = {
  telegram: 4096,
  discord: 2000,
  slack: 4000,
  whatsapp: 1024,
};

/**
 * The card a chat shows: what runs, why it asks, how to answer there. No operator plumbing (API
 * routes, CLI commands): chat users see the card, operators the dashboard and `keel approvals`.
 */
export function questionText(record: ApprovalRecord, timeoutMs: number): string {
  const id = record.id;
  const platform = record.address?.platform;
  const c = commandSigil(platform);
  const how = `${c}approve ${id} (add "session" to allow exactly this for you in this session) or ${c}deny ${id}`;
  const head = `⚠️ Approval needed [${id}]: ${record.toolName} wants to run`;
  const rest = [
    `Why: ${record.reason}.`,
    `Answer with ${platform && WITH_BUTTONS.has(platform) ? `the buttons, or ${how}` : how}. Denied in ${duration(timeoutMs)} without an answer.`,
  ];
  const used = head.length + rest.join("\n").length;
  return [head, commandBlock(record, used), ...rest].join("\n");
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
  const head = `${what}${who} [${record.id}]`;
  return `${head}\n${commandBlock(record, head.length)}`;
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

/**
 * The command as a code block (Telegram and the web chat render it verbatim), whole and with
 * hidden characters made visible; head and tail only where the chat's message is too short.
 */
function commandBlock(record: ApprovalRecord, usedChars: number): string {
  const visible = makeVisible(record.summary).replaceAll(FENCE, "'''");
  const limit = CARD_LIMIT[record.address?.platform ?? ""];
  // Room for the fences, and for the few characters formatting may add.
  const budget = limit === undefined ? Number.POSITIVE_INFINITY : limit - usedChars - 64;
  return `${FENCE}\n${fitVisible(visible, budget, record.id)}\n${FENCE}`;
}
