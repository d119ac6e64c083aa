/**
 * Builds the message list a turn sends to the model from the stored transcript, so that it is
 * always a valid OpenAI conversation whatever point a crash or interruption left it at, and
 * holds the system notes that tell the model it is continuing interrupted work. The notes live
 * only in the model input, never in the stored transcript.
 */
import type { UserContent } from "../agent/content.js";
import type { ChatMessage, ToolCall } from "../agent/types.js";
import type { ResumeReason } from "../sessions/store.js";

export const NOT_RUN_RESULT =
  "[Keel: this tool call was not run because the turn was interrupted.]";

/**
 * Puts every tool result right after the assistant message that asked for it and drops orphans.
 * Tool calls without a result get a "not run" placeholder (in memory only), except in the
 * trailing assistant message, whose missing calls the agent loop runs when it resumes.
 */
export function normalizeHistory(messages: ChatMessage[]): ChatMessage[] {
  const results = new Map<string, ChatMessage>();
  for (const m of messages) if (m.role === "tool") results.set(m.tool_call_id, m);
  const out: ChatMessage[] = [];
  messages.forEach((m, index) => {
    if (m.role === "tool") return;
    out.push(m);
    if (m.role !== "assistant" || !m.tool_calls?.length) return;
    const trailing = messages.slice(index + 1).every((later) => later.role === "tool");
    for (const call of m.tool_calls) {
      const result = results.get(call.id);
      if (result) out.push(result);
      else if (!trailing) out.push(placeholder(call));
    }
  });
  return out;
}

function placeholder(call: ToolCall): ChatMessage {
  return { role: "tool", tool_call_id: call.id, content: NOT_RUN_RESULT };
}

/**
 * True when the last assistant message asks for tool calls that have no result yet: a turn that
 * continues after an approval has something to do only then.
 */
export function hasOpenToolCalls(messages: readonly ChatMessage[]): boolean {
  const index = messages.findLastIndex((m) => m.role === "assistant");
  const last = messages[index];
  if (last?.role !== "assistant" || !last.tool_calls?.length) return false;
  const answered = new Set(
    messages.slice(index + 1).flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])),
  );
  return last.tool_calls.some((call) => !answered.has(call.id));
}

/** True when the transcript does not end with the model's answer (a user message, tool results). */
export function needsAnswer(messages: readonly ChatMessage[]): boolean {
  const last = messages.at(-1);
  if (!last) return false;
  return last.role !== "assistant" || hasOpenToolCalls(messages);
}

/**
 * What the user asked since the transcript's last reply (an assistant message with text), oldest
 * first: more than one message when others came in while its turn was cut off. Empty when the
 * last user message was answered.
 */
export function unansweredRequests(messages: readonly ChatMessage[]): UserContent[] {
  const lastReply = messages.findLastIndex(
    (m) => m.role === "assistant" && typeof m.content === "string" && m.content.trim() !== "",
  );
  return messages.slice(lastReply + 1).flatMap((m) => (m.role === "user" ? [m.content] : []));
}

/** Several requests as one message, in order (text joined by blank lines, parts kept). */
export function joinRequests(requests: readonly UserContent[]): UserContent {
  if (requests.every((r) => typeof r === "string")) return requests.join("\n\n");
  return requests.flatMap((r) =>
    typeof r === "string" ? [{ type: "text" as const, text: r }] : r,
  );
}

/**
 * The request a cut-off turn was answering, as one message: every message since the last reply
 * (see {@link unansweredRequests}), or the last user message when that one was answered. Null
 * when the transcript has no user message.
 */
export function cutOffRequest(messages: readonly ChatMessage[]): UserContent | null {
  const requests = unansweredRequests(messages);
  if (requests.length > 0) return joinRequests(requests);
  const last = messages.findLast((m) => m.role === "user");
  return last?.role === "user" ? last.content : null;
}

/** True when the history ends with tool results the agent never answered (auto-continue). */
export function endsWithUnansweredToolResults(messages: readonly ChatMessage[]): boolean {
  return messages.at(-1)?.role === "tool";
}

/** Told to the model when earlier tool results went unanswered (docs/seed-map.md, seed 000). */
export const AUTO_CONTINUE_NOTE =
  "[System note: Your previous turn was interrupted before you could act on the last tool " +
  "result(s) above. Finish handling those results and say briefly what was done, then answer " +
  "the user's new message below.]";

/**
 * The model input for a turn answering a new user message (the last element of `input`): when
 * the history before it ends with unanswered tool results, the auto-continue note goes in
 * between as a system message; the user's message itself is kept intact after it. Never for
 * a history ending with an assistant or user message, or for an empty one.
 */
export function withAutoContinueNote(input: readonly ChatMessage[]): ChatMessage[] {
  const last = input.at(-1);
  const before = input.slice(0, -1);
  if (last?.role !== "user" || !endsWithUnansweredToolResults(before)) return [...input];
  return [...before, { role: "system", content: AUTO_CONTINUE_NOTE }, last];
}

const REASON_PHRASES: Record<ResumeReason, string> = {
  restart_timeout: "a gateway restart",
  shutdown_timeout: "a gateway shutdown",
  restart_interrupted: "an unexpected gateway stop",
  queued_during_stop: "a gateway restart",
};

/**
 * The one system note of a synthetic resume turn (no user message): names what cut the turn
 * off and asks the agent to continue and tell the user the session is back.
 */
export function resumeNote(reason: ResumeReason | null): string {
  const cause = reason ? REASON_PHRASES[reason] : "a gateway restart";
  return (
    `[System note: Your previous turn was cut off by ${cause}; the gateway is back. Your ` +
    "earlier progress is in the history above: continue the task where you left off. A restart " +
    "or stop command in the history has already taken effect: do not run it again. Do not " +
    "repeat tool calls whose outcome is unknown without checking first. Tell the user their " +
    "session was restored and what state the interrupted work is in.]"
  );
}

/**
 * Adds a system note for the model. A trailing assistant message whose tool calls still lack
 * results stays last (the agent loop runs those calls before the next model call), and so does
 * a trailing user message when `keepUserLast` (it is the turn's new input).
 */
export function withNoteBeforeTail(
  history: readonly ChatMessage[],
  note: ChatMessage,
  /** `userCount`: how many user messages end the new input (a backlog taken as one turn); 1. */
  options: { keepUserLast: boolean; userCount?: number },
): ChatMessage[] {
  let tail = history.length;
  while (tail > 0 && history[tail - 1]!.role === "tool") tail -= 1;
  const before = history[tail - 1];
  const pendingCalls =
    before?.role === "assistant" && (before.tool_calls?.length ?? 0) > history.length - tail;
  if (pendingCalls) tail -= 1;
  else if (options.keepUserLast && history.at(-1)?.role === "user") {
    tail = history.length - 1;
    for (let n = (options.userCount ?? 1) - 1; n > 0 && history[tail - 1]?.role === "user"; n--)
      tail -= 1;
  } else tail = history.length;
  return [...history.slice(0, tail), note, ...history.slice(tail)];
}
