/** What the gateway hands the runner, and what the runner reports of its running turns. */
import type { Logger } from "pino";
import type { BUSY_INPUT_MODES } from "../config/schema.js";
import type {
  ApprovalPress,
  ApprovalPressResult,
  ChatAddress,
  ProgressUpdate,
} from "../contract/platform.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type {
  ClusterStore,
  InboxItem,
  InboxStore,
  OutboxStore,
  SessionStore,
  StoreHandle,
  TurnStore,
} from "../sessions/store.js";
import type {
  AgentRun,
  IsReadOnlyTool,
  SenderGate,
  TurnApprovals,
  TurnBudgets,
  TurnTaskHooks,
} from "./agent-run.js";
import type { ExtraChatCommand, GatewayControl } from "./chat-commands.js";
import type { MediaSettings } from "./media-input.js";

export type BusyInputMode = (typeof BUSY_INPUT_MODES)[number];

export interface RunnerOptions {
  store: InboxStore & SessionStore & TurnStore & OutboxStore & ClusterStore & StoreHandle;
  /** Null when no model is configured: messages are answered with how to configure one. */
  agent: AgentRun | null;
  isReadOnlyTool: IsReadOnlyTool;
  busyInputMode: BusyInputMode;
  maxConcurrentTurns: number;
  /** How long an interrupted session may continue where it left off (auto_resume_freshness). */
  autoResumeFreshnessMs: number;
  logger: Logger;
  control: GatewayControl;
  /** Wakes the outbox dispatcher. */
  onReplyQueued(): void;
  showTyping?(address: ChatAddress): () => void;
  /** Whether a reply to `address` reaches it through the turn itself (PlatformAdapter.repliesInBand). */
  repliesInBand?(address: ChatAddress): boolean;
  /** Shows a running turn's progress in its chat (the platform adapter's `progress`). */
  progress?(update: ProgressUpdate): void;
  /** Told the number of running turns whenever it changes. */
  onActiveTurnsChange?(count: number): void;
  crashPoint: CrashPoint;
  /** Chat commands other parts contribute (`/schedules`): the text they answer with. */
  extraCommands?: Record<string, ExtraChatCommand>;
  /** How files that come with messages are fetched and read (media-input.ts). */
  media?: MediaSettings;
  /** Lines other parts add to `/status`. */
  statusLines?(): string[];
  /** Tool calls that wait for a human (src/approvals); absent: every call runs. */
  approvals?: TurnApprovals & {
    press(press: ApprovalPress): Promise<ApprovalPressResult>;
  };
  /** Budgets that hold model calls once spent (src/budgets); absent: no budgets. */
  budgets?: TurnBudgets;
  /** Per-sender rate limits: messages over the rate wait in the inbox (src/budgets). */
  senderLimits?: SenderGate;
  /** Lines about the model and its latest calls, added to `/status`. */
  modelStatusLines?(item: InboxItem): Promise<string[]>;
  /**
   * Set when several gateways share the store: a turn runs only under its session's lease, held
   * by `owner` (this instance's id) and renewed every third of `ttlMs`; its writes carry it.
   */
  sessionLeases?: { owner: string; ttlMs: number };
  /** Tasks' child sessions (src/tasks): they run beside the cap of turns, bounded per chat. */
  tasks?: TurnTaskHooks;
  now?: () => number;
}

/** A running turn as reported by status and used by the stop sequence. */
export interface ActiveTurnInfo {
  sessionKey: string;
  sessionId: string;
  address: ChatAddress | null;
  startedAt: number;
  agentStarted: boolean;
  currentTool: string | null;
}
