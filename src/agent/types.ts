/**
 * The agent's vocabulary: transcript messages in the model's (OpenAI chat) shape, tool calls,
 * the events a turn emits while it runs, and how a turn ends.
 */
import type { ChatAddress, StopReason, TurnEvent } from "../contract/platform.js";
import type { Tool, ToolContext, ToolOutput } from "./tools/tool.js";

/** One tool call requested by the model; `arguments` is the raw JSON string the model produced. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/**
 * A piece of a user message with more than text. `saved_image` is Keel's own: an image kept in
 * the workspace, turned into an `image_url` data URL (or a text note) only when a request is
 * built, so the transcript stays small and follows the current `model.vision`.
 */
export type UserContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } }
  | { type: "saved_image"; path: string; mime: string };

/** A transcript message, stored as-is and sent back to the model on the next call. */
export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string | UserContentPart[] }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

// How a turn ends and what it streams are the platform contract's words (platforms show them).
export type { StopReason, TurnEvent };

export interface TurnResult {
  stopReason: StopReason;
  /** Tokens of the call that wrote `finalMessage`, stored with it. */
  usage?: CallUsage;
  /**
   * The turn stopped at a tool call that waits for a human (stopReason `stop`): `reply` asks
   * for it, or is empty when the question was already asked (a resumed turn). A budget pause
   * (before a model call) ends a turn the same way, with the pause's id.
   */
  awaitingApproval?: string;
  /**
   * The turn stopped at calls to the client's functions (stopReason `stop`): the assistant
   * message asking for them is journaled; their results come with the client's next message.
   */
  clientToolCalls?: ToolCall[];
  /** The final assistant text shown to the user (may be empty for aborted turns). */
  reply: string;
  /** The final assistant message, not yet stored: the caller stores it with the reply, atomically. */
  finalMessage: ChatMessage | null;
  errorMessage?: string;
  iterations: number;
}

/** One entry of the OpenAI `tools` request array. */
export interface ToolSpec {
  type: "function";
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** An assistant message, as the model returns it. */
export type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;

/**
 * How a model call failed; every kind is an expected outcome, never a thrown error.
 * `context_exceeded`: the endpoint said the prompt is longer than the model's window.
 */
export type LlmFailureKind =
  | "http"
  | "timeout"
  | "aborted"
  | "network"
  | "invalid"
  | "context_exceeded";

/** Tokens of one model call: from the endpoint's `usage`, or estimated (and marked so) without it. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  estimated: boolean;
}

/** Tokens of one model call and the model that answered it. */
export interface CallUsage extends TokenUsage {
  model: string;
}

/** The prompt for the next model call, or why none fits the model's window. */
export type PreparedPrompt =
  | {
      ok: true;
      /** System prompt included. */
      prompt: ChatMessage[];
      estimate: number;
      /** Leading messages of the turn's history a recorded summary now stands in for. */
      dropped: number;
    }
  | { ok: false; error: string; dropped?: number };

/**
 * Where a compaction is recorded (the store, through the runner): the keeper (src/context)
 * writes through it, the turn hands it in.
 */
export interface CompactionSink {
  /**
   * Records `summary` as standing in for the transcript up to (not including) its
   * `coveredCount`-th user or assistant message after the current summary. False when the
   * record does not match (nothing recorded).
   */
  record(input: {
    coveredCount: number;
    summary: string;
    usage: (TokenUsage & { model: string }) | null;
    tokensBefore: number;
    tokensAfter: number;
  }): Promise<boolean>;
}

/** Keeps each prompt inside the model's window (src/context/context-keeper.ts). */
export interface PromptKeeper {
  /** `force`: summarise older messages even when the prompt would fit (after an overflow). */
  prepare(
    systemPrompt: string,
    messages: readonly ChatMessage[],
    tools: readonly ToolSpec[],
    signal: AbortSignal,
    force?: boolean,
  ): Promise<PreparedPrompt>;
  /** Learns from what the model counted for a prompt. */
  observe(prompt: readonly ChatMessage[], tools: readonly ToolSpec[], usage?: TokenUsage): void;
  /** The model refused a prompt as longer than its window. */
  overflowed(): void;
}

/** The outcome of one model call. `error` is short, human and free of secrets. */
export type LlmResult =
  | {
      ok: true;
      message: AssistantMessage;
      finishReason: string | null;
      /** What the endpoint reported; absent when it sent no `usage`. */
      usage?: TokenUsage;
      /** The model that answered (a fallback, after the main one failed). */
      model?: string;
    }
  | {
      ok: false;
      kind: LlmFailureKind;
      status?: number;
      error: string;
      /** The endpoint's Retry-After, in milliseconds. */
      retryAfterMs?: number;
    };

export interface LlmRequest {
  /** The full prompt, system message included. */
  messages: ChatMessage[];
  /** The model this session chose (`/model`); a chain of models calls it first. */
  preferred?: string;
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
 * awaited in order; a rejection (e.g. disk full) ends the turn by throwing out of `runAgentLoop`.
 */
export interface TurnJournal {
  /**
   * Appends messages to the stored transcript (assistant tool-call messages, steered user input),
   * with the tokens of the model call that wrote them.
   */
  recordMessages(messages: ChatMessage[], usage?: CallUsage): Promise<void>;
  /** Called before a tool call runs. */
  recordToolStart(call: ToolCall): Promise<void>;
  /** Called after it ran; the implementation also appends the matching `role: "tool"` message. */
  recordToolFinish(call: ToolCall, output: ToolOutput): Promise<void>;
}

/**
 * What happens to a tool call before it runs (approvals): `run` it, `skip` it with an output the
 * model sees instead (denied), or `wait`: the turn stops here until a human answers, and the
 * call runs (or is skipped) in the turn that continues it.
 */
export type GateVerdict =
  | { kind: "run" }
  | { kind: "skip"; output: string }
  | { kind: "wait"; approvalId: string; question: string | null };

/**
 * What happens before a model call (budgets): it goes ahead, the turn stops here until a human
 * answers (`wait`: the turn that continues it calls the model), or the turn ends with `reply`.
 */
export type ModelCallVerdict =
  | { kind: "go" }
  | { kind: "wait"; pauseId: string; question: string | null }
  | { kind: "stop"; reply: string };

/** Decides each model call of a turn before it starts. */
export interface ModelCallGate {
  check(): Promise<ModelCallVerdict>;
}

/** Decides each tool call of a turn before it is journaled as started. */
export interface ToolGate {
  check(call: ToolCall, tool: Tool | undefined): Promise<GateVerdict>;
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
  /** The chat this turn answers, passed to the tools. */
  chat?: ChatAddress | null;
  /** Keeps prompts inside the model's window; without it the whole history is sent. */
  keeper?: PromptKeeper;
  /** The model this session chose (`/model`). */
  preferredModel?: string;
  /** Whose memory file the `memory` tool edits (`<platform>-<user id>`), if anyone's. */
  memoryUser?: string | null;
  /** The session of the turn, passed to the tools. */
  sessionId?: string | null;
  /** The session key and who started the turn, passed to the tools (the `delegate` tool). */
  sessionKey?: string | null;
  requester?: string | null;
  /** Approvals: consulted before each tool call; absent means every call runs. */
  gate?: ToolGate;
  /** Budgets: consulted before each model call; absent means every call goes ahead. */
  modelGate?: ModelCallGate;
  /**
   * Functions a `/v1` client defines, offered beside the registry's tools: a call to one is not
   * run here; the turn ends with it (`clientToolCalls`) and the client runs it.
   */
  clientTools?: ToolSpec[];
}
