/** What the runner needs from the agent: one call that runs a turn to its end. */

import type { TurnInput } from "../agent/agent.js";
import type {
  ChatMessage,
  ModelCallGate,
  ToolGate,
  TurnJournal,
  TurnResult,
} from "../agent/types.js";
import type { ChatAddress } from "../contract/platform.js";
import type { InboxItem, UsageScope } from "../sessions/store.js";

// The journal is the agent loop's contract; the runner implements it over the store.
export type { TurnJournal };

/** What a turn hands the agent: the agent defines it (src/agent/agent.ts). */
export type AgentRunInput = TurnInput;

/** Runs a turn with the configured model and tools; never throws for model or tool failures. */
export type AgentRun = (input: AgentRunInput) => Promise<TurnResult>;

/** Tells whether a tool may simply be re-run after a crash. */
export type IsReadOnlyTool = (name: string) => boolean;

/** The turn a gate decides for: where to ask, and who may answer besides operators. */
export interface GateTurn {
  sessionKey: string;
  sessionId: string;
  turnId: number;
  address: ChatAddress | null;
  /** `<platform>:<user id>` of who started the turn, when known. */
  requester: string | null;
  /** The person or credential the turn runs for: "approve for session" grants to them alone. */
  asker: string | null;
}

/**
 * What the runner needs from tasks (src/tasks implements it): a task's child session runs like
 * any other, but its progress is not shown in the chat, its reply is the task's result (only an
 * approval question goes out as written), and ended background tasks are recorded in the
 * transcript of the session that started them, before its next message.
 */
export interface TurnTaskHooks {
  isChild(sessionKey: string): boolean;
  /** The text a child's reply goes out with, or null: it is not sent. */
  childReply(sessionKey: string, text: string, awaitingApproval: boolean): string | null;
  notesFor(sessionKey: string): Promise<{ ids: number[]; messages: ChatMessage[] } | null>;
  /** False once the child's task has ended (cancelled, expired, timed out): nothing more runs. */
  admits(sessionKey: string): Promise<boolean>;
}

/** What the runner needs from budgets (src/budgets implements it). */
export interface TurnBudgets {
  /** The gate for the turn's model calls; `scope`: whose spend the turn counts as. */
  gateFor(turn: GateTurn, scope: UsageScope): ModelCallGate;
}

/** Per-sender rate limits (src/budgets implements it). */
export interface SenderGate {
  /** True when the stored message must wait; `release` starts it later, in its chat's order. */
  hold(item: InboxItem, release: (item: InboxItem) => void): boolean;
}

/** What the runner needs from approvals (src/approvals implements it). */
export interface TurnApprovals {
  gateFor(turn: GateTurn): ToolGate;
  /** A new message came while calls of this transcript waited: they are denied, not run. */
  supersede(turn: GateTurn): Promise<void>;
}
