/**
 * The agent's vocabulary: transcript messages in the model's (OpenAI chat) shape, tool calls,
 * the events a turn emits while it runs, and how a turn ends.
 */
import type { Tool, ToolContext, ToolOutput } from "./tools/tool.js";

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

/** One entry of the OpenAI `tools` request array. */
export interface ToolSpec {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/** An assistant message, as the model returns it. */
export type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;

/** How a model call failed; every kind is an expected outcome, never a thrown error. */
export type LlmFailureKind = "http" | "timeout" | "aborted" | "network" | "invalid";

/** The outcome of one model call. `error` is short, human and free of secrets. */
export type LlmResult =
  | { ok: true; message: AssistantMessage; finishReason: string | null }
  | { ok: false; kind: LlmFailureKind; status?: number; error: string };

export interface LlmRequest {
  /** The full prompt, system message included. */
  messages: ChatMessage[];
  tools: ToolSpec[];
  /** Aborting it ends the call promptly with `kind: "aborted"`. */
  signal: AbortSignal;
  /** Called with each piece of assistant text as it streams in. */
  onTextDelta?(text: string): void;
}

/** A chat model endpoint. `complete` never throws for request, model or network failures. */
export interface LlmClient {
  complete(input: LlmRequest): Promise<LlmResult>;
}

/** The tools a turn may call, looked up by name. */
export interface ToolRegistry {
  get(name: string): Tool | undefined;
  /** The OpenAI `tools` array for every registered tool. */
  specs(): ToolSpec[];
  /**
   * Runs one model tool call: unknown tools, unparsable or invalid arguments and thrown errors
   * all become an `isError` output the model sees. Never throws.
   */
  run(call: ToolCall, context: ToolContext): Promise<ToolOutput>;
}

/**
 * How the agent loop persists progress; implemented by the caller (the runner). Each method is
 * awaited in order; a rejection (e.g. disk full) ends the turn by throwing out of `runTurn`.
 */
export interface TurnJournal {
  /** Appends messages to the stored transcript (assistant tool-call messages, steered user input). */
  recordMessages(messages: ChatMessage[]): Promise<void>;
  /** Called before a tool call runs. */
  recordToolStart(call: ToolCall): Promise<void>;
  /** Called after it ran; the implementation also appends the matching `role: "tool"` message. */
  recordToolFinish(call: ToolCall, output: ToolOutput): Promise<void>;
}

export interface RunTurnOptions {
  llm: LlmClient;
  tools: ToolRegistry;
  systemPrompt: string;
  /** The stored transcript, already ending with the new user message; no system message. */
  history: ChatMessage[];
  /** Model calls allowed in this turn. */
  maxIterations: number;
  /** Working folder for the tools. */
  cwd: string;
  /** Aborting it interrupts the turn: the model call is cancelled and a running tool is killed. */
  signal: AbortSignal;
  journal: TurnJournal;
  onEvent(event: TurnEvent): void;
  /** Returns (and forgets) messages the user sent while this turn ran, in `steer` mode. */
  takeSteeredInput?(): string[];
}
