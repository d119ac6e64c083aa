/**
 * The agent's vocabulary: transcript messages in the model's (OpenAI chat) shape, tool calls,
 * the events a turn emits while it runs, and how a turn ends.
 */

/** One tool call requested by the model; `arguments` is the raw JSON string the model produced. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A transcript message, stored as-is and sent back to the model on the next call. */
export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** Why a turn ended. `error` and `aborted` carry an `errorMessage`. */
export type StopReason = "stop" | "max_iterations" | "error" | "aborted";

export interface TurnResult {
  stopReason: StopReason;
  /** The final assistant text shown to the user (may be empty for aborted turns). */
  reply: string;
  /** The final assistant message, not yet stored: the caller stores it with the reply, atomically. */
  finalMessage: ChatMessage | null;
  errorMessage?: string;
  iterations: number;
}

/** Events a running turn emits, in order, for streaming to clients. */
export type TurnEvent =
  | { type: "text_delta"; text: string }
  | { type: "tool_start"; toolCallId: string; name: string; arguments: string }
  | { type: "tool_end"; toolCallId: string; name: string; output: string; isError: boolean };
