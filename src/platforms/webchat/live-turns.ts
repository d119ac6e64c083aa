import type { LiveFrame } from "./protocol.js";

/** Cap on live tool output sent to pages; the full output stays in the transcript. */
export const MAX_LIVE_OUTPUT_CHARS = 16_000;
/** Cap on the text a running turn keeps for late joiners. */
const MAX_SNAPSHOT_TEXT_CHARS = 200_000;

type Item =
  | { kind: "text"; text: string }
  | { kind: "tool"; start: LiveFrame & { type: "tool_start" }; end: LiveFrame | null };

interface LiveTurn {
  sessionId: string;
  items: Item[];
  textChars: number;
}

/**
 * The running turns of web chat conversations, kept in memory so a page that opens a
 * conversation mid-turn sees what was already streamed. Nothing here is durable.
 */
export class LiveTurns {
  private readonly turns = new Map<string, LiveTurn>();

  /** Records a live frame; returns it (possibly trimmed) for broadcasting. */
  record(frame: LiveFrame): LiveFrame {
    const id = frame.conversation_id;
    switch (frame.type) {
      case "turn_start":
        this.turns.set(id, { sessionId: frame.session_id, items: [], textChars: 0 });
        return frame;
      case "turn_end":
        this.turns.delete(id);
        return frame;
      case "delta":
        this.addText(this.turnOf(id, frame.session_id), frame.text);
        return frame;
      case "tool_start": {
        const trimmed = { ...frame, arguments: trim(frame.arguments) };
        this.turnOf(id, frame.session_id).items.push({ kind: "tool", start: trimmed, end: null });
        return trimmed;
      }
      case "tool_end": {
        const trimmed = { ...frame, output: trim(frame.output) };
        const tool = this.turnOf(id, frame.session_id).items.find(
          (item) => item.kind === "tool" && item.start.tool_call_id === frame.tool_call_id,
        );
        if (tool?.kind === "tool") tool.end = trimmed;
        return trimmed;
      }
    }
  }

  /** The frames that replay a conversation's running turn, in order; empty when idle. */
  snapshot(conversationId: string): LiveFrame[] {
    const turn = this.turns.get(conversationId);
    if (!turn) return [];
    const base = { conversation_id: conversationId, session_id: turn.sessionId };
    const frames: LiveFrame[] = [{ type: "turn_start", ...base }];
    for (const item of turn.items) {
      if (item.kind === "text") frames.push({ type: "delta", ...base, text: item.text });
      else {
        frames.push(item.start);
        if (item.end) frames.push(item.end);
      }
    }
    return frames;
  }

  /** Forgets every running turn (the adapter stopped). */
  clear(): void {
    this.turns.clear();
  }

  private turnOf(conversationId: string, sessionId: string): LiveTurn {
    let turn = this.turns.get(conversationId);
    // A delta without turn_start (the adapter joined late) still starts a snapshot.
    if (!turn) {
      turn = { sessionId, items: [], textChars: 0 };
      this.turns.set(conversationId, turn);
    }
    return turn;
  }

  private addText(turn: LiveTurn, text: string): void {
    if (turn.textChars >= MAX_SNAPSHOT_TEXT_CHARS) return;
    turn.textChars += text.length;
    const last = turn.items.at(-1);
    if (last?.kind === "text") last.text += text;
    else turn.items.push({ kind: "text", text });
  }
}

function trim(text: string): string {
  if (text.length <= MAX_LIVE_OUTPUT_CHARS) return text;
  const dropped = text.length - MAX_LIVE_OUTPUT_CHARS;
  return `${text.slice(0, MAX_LIVE_OUTPUT_CHARS)}\n… (${dropped} more characters)`;
}
