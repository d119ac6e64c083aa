/** Per-session-key state held by the runner: the running turn and the work waiting behind it. */
import type { UserContent } from "../agent/content.js";
import type { AbortCause, ChatAddress, OutboundFile } from "../platforms/platform.js";
import type { InboxItem, LeaseToken, SessionRecord } from "../sessions/store.js";

export type Work =
  | { kind: "message"; item: InboxItem }
  | { kind: "resume"; session: SessionRecord }
  | { kind: "retry"; text: UserContent; address: ChatAddress; sessionKey: string }
  /** A human answered an approval: continue the transcript that waited for it. */
  | { kind: "continue"; sessionId: string; requester: string | null };

export type { AbortCause };

export interface ActiveTurn {
  sessionKey: string;
  sessionId: string;
  turnId: number | null;
  address: ChatAddress | null;
  startedAt: number;
  /** False until the first model call starts: such turns get no stop notice. */
  agentStarted: boolean;
  currentTool: string | null;
  controller: AbortController;
  abortCause: AbortCause | null;
  /** Messages handed to the running turn in `steer` mode, not yet taken. */
  steer: InboxItem[];
  /** Steered messages the turn has taken; closed in the inbox once the turn is recorded. */
  steerTaken: InboxItem[];
  /** Files the turn sent (`send_file`), in order. */
  sentFiles: OutboundFile[];
  work: Work;
  /** The session's lease while the store is shared by several gateways: every write carries it. */
  lease: LeaseToken | null;
  done: Promise<void>;
  /** `<platform>:<user id>` of who started the turn (approvals: they may answer). */
  requester: string | null;
}

export interface Lane {
  active: ActiveTurn | null;
  queue: Work[];
  /**
   * Chat commands waiting for (or acting under) the session's lease, several gateways only: no
   * queued work of the lane starts meanwhile. Each runs after the one before it (`commandChain`).
   */
  commands?: number;
  commandChain?: Promise<void> | null;
}

/** A turn about to run `work` for `sessionKey`, not yet recorded (no turn id, no address yet). */
export function createActiveTurn(sessionKey: string, work: Work, startedAt: number): ActiveTurn {
  return {
    sessionKey,
    sessionId: work.kind === "message" ? work.item.sessionId : "",
    turnId: null,
    address: null,
    startedAt,
    agentStarted: false,
    currentTool: null,
    controller: new AbortController(),
    abortCause: null,
    steer: [],
    steerTaken: [],
    sentFiles: [],
    work,
    lease: null,
    done: Promise.resolve(),
    requester: requesterOf(work),
  };
}

function requesterOf(work: Work): string | null {
  if (work.kind === "continue") return work.requester;
  if (work.kind === "message" && work.item.senderId !== undefined) {
    return `${work.item.platform}:${work.item.senderId}`;
  }
  return null;
}
