/** What the runner needs from the agent: one call that runs a turn to its end. */

import type { TurnInput } from "../agent/agent.js";
import type { ToolGate, TurnJournal, TurnResult } from "../agent/types.js";
import type { ChatAddress } from "../contract/platform.js";

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

/** What the runner needs from approvals (src/approvals implements it). */
export interface TurnApprovals {
  gateFor(turn: GateTurn): ToolGate;
  /** A new message came while calls of this transcript waited: they are denied, not run. */
  supersede(turn: GateTurn): Promise<void>;
}
