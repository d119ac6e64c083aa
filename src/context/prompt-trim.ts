/**
 * Shortens tool outputs in what is sent to the model (never in the store): the start and the end
 * of an output stay, the middle is replaced by a note saying how much was left out.
 */
import type { ChatMessage } from "../agent/types.js";

/** The note that replaces the middle of a shortened output. */
export function omittedNote(chars: number): string {
  return `\n[… ${chars} characters of this tool output left out to fit the context window; the full output is in the transcript …]\n`;
}

/** `text` cut to about `maxChars`, keeping its head and tail. */
export function shorten(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  const keep = Math.max(0, maxChars - 120);
  const head = Math.ceil(keep * 0.6);
  const tail = keep - head;
  const left = text.length - head - tail;
  return `${text.slice(0, head)}${omittedNote(left)}${tail > 0 ? text.slice(-tail) : ""}`;
}

/**
 * Tool results before index `from` (all when `from` is the length) longer than `maxChars` are
 * shortened; other messages are returned as they are (same objects).
 */
export function trimToolOutputs(
  messages: readonly ChatMessage[],
  maxChars: number,
  until: number = messages.length,
): ChatMessage[] {
  return messages.map((m, index) =>
    index < until && m.role === "tool" && m.content.length > maxChars
      ? { ...m, content: shorten(m.content, maxChars) }
      : m,
  );
}

/** Index of the newest user message (the start of the current exchange), or 0. */
export function lastUserIndex(messages: readonly ChatMessage[]): number {
  return Math.max(
    0,
    messages.findLastIndex((m) => m.role === "user"),
  );
}
