/** What the runner needs from the agent: one call that runs a turn to its end. */

import type {
  ChatMessage,
  ModelCallGate,
  ToolGate,
  ToolSpec,
  TurnEvent,
  TurnJournal,
  TurnResult,
} from "../agent/types.js";
import type { CompactionSink } from "../context/context-keeper.js";
import type { ChatAddress } from "../contract/platform.js";
import type { InboxItem, UsageScope } from "../sessions/store.js";

// The journal is the agent loop's contract; the runner implements it over the store.
export type { TurnJournal };

export interface AgentRunInput {
  history: ChatMessage[];
  signal: AbortSignal;
  journal: TurnJournal;
  onEvent(event: TurnEvent): void;
  takeSteeredInput(): string[];
  /** The chat this turn answers, if any (tools that act on "this chat" need it). */
  chat?: ChatAddress | null;
  /** Tells the chat once per session that the model refused the images it was sent. */
  onImagesRefused?(): void;
  /** The transcript the turn runs in. */
  sessionId?: string;
  /** The summary standing in for the transcript's older messages (its latest compaction). */
  summary?: string | null;
  /** Records a compaction made during the turn (one store transaction). */
  compactionSink?: CompactionSink;
  /** The model the session chose with `/model`. */
  preferredModel?: string | null;
  /** Whose memory file the turn uses (`<platform>-<user id>`), if anyone's. */
  memoryUser?: string | null;
  /** Approvals for this turn's tool calls; absent: every call runs. */
  gate?: ToolGate;
  /** Budgets for this turn's model calls; absent: every call goes ahead. */
  modelGate?: ModelCallGate;
  /** Functions the `/v1` client offers; the turn ends at a call to one (`clientToolCalls`). */
  clientTools?: ToolSpec[];
}

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
