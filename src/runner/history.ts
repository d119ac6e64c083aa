/**
 * Builds the message list a turn sends to the model from the stored transcript, so that it is
 * always a valid OpenAI conversation whatever point a crash or interruption left it at.
 */
import type { ChatMessage, ToolCall } from "../agent/types.js";

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

/** True when the history ends with tool results the agent never answered (auto-continue). */
export function endsWithUnansweredToolResults(messages: ChatMessage[]): boolean {
  return messages.length > 0 && messages[messages.length - 1]!.role === "tool";
}

export const AUTO_CONTINUE_NOTE =
  "[System note: your previous turn was interrupted after these tool results and you never " +
  "answered them. Take them into account; the user's new message follows.]";
