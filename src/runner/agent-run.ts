/** What the runner needs from the agent: one call that runs a turn to its end. */

import type { ToolOutput } from "../agent/tools/tool.js";
import type { ChatMessage, ToolCall, TurnEvent, TurnResult } from "../agent/types.js";

/** Persists a turn's steps as they happen (backed by the store). Throws on storage failure. */
export interface TurnJournal {
  recordMessages(messages: ChatMessage[]): Promise<void>;
  recordToolStart(call: ToolCall): Promise<void>;
  recordToolFinish(call: ToolCall, output: ToolOutput): Promise<void>;
}

export interface AgentRunInput {
  history: ChatMessage[];
  signal: AbortSignal;
  journal: TurnJournal;
  onEvent(event: TurnEvent): void;
  takeSteeredInput(): string[];
}

/** Runs a turn with the configured model and tools; never throws for model or tool failures. */
export type AgentRun = (input: AgentRunInput) => Promise<TurnResult>;

/** Tells whether a tool may simply be re-run after a crash. */
export type IsReadOnlyTool = (name: string) => boolean;
