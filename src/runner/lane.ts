/** Per-session-key state held by the runner: the running turn and the work waiting behind it. */
import type { UserContent } from "../agent/content.js";
import type { AbortCause, ChatAddress, OutboundFile } from "../contract/platform.js";
import type { InboxItem, LeaseToken, SessionRecord } from "../sessions/store.js";
import { TASK_PLATFORM } from "./scheduled-input.js";

export type Work =
  | {
      kind: "message";
      item: InboxItem;
      /**
       * False for a message `queue` mode keeps for a turn of its own (it came while a turn ran);
       * otherwise messages waiting next to each other are taken together (lane-batch.ts).
       */
      together?: boolean;
      /** The waiting messages taken with `item` into this one turn, in order (a backlog). */
      joined?: InboxItem[];
    }
  | { kind: "resume"; session: SessionRecord }
  | { kind: "retry"; text: UserContent; address: ChatAddress; sessionKey: string }
  /** A human answered an approval (or a budget pause): continue the transcript that waited. */
  | {
      kind: "continue";
      sessionId: string;
      requester: string | null;
      asker: string | null;
      budget?: boolean;
    };

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
  /** Whose turn this is, for approvals granted "for the session" (see askerOf). */
  asker: string | null;
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

/** Whether the message is running, queued or steered into a turn in one of these lanes. */
export function holdsMessage(lanes: Iterable<Lane>, inboxId: number): boolean {
  const isIt = (work: Work) => work.kind === "message" && work.item.id === inboxId;
  for (const lane of lanes) {
    if (lane.queue.some(isIt)) return true;
    const active = lane.active;
    if (active && (isIt(active.work) || active.steer.some((i) => i.id === inboxId))) return true;
  }
  return false;
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
    asker: askerOf(work),
  };
}

/**
 * The person or credential a turn runs for: the sender (`telegram:42`), or for a message without
 * one (the `/v1` API, the web chat) the kind of credential it came with (`api:operator` for the
 * control token, `api:api_key` for `platforms.api.key`). Null for resumes and retries.
 */
function askerOf(work: Work): string | null {
  if (work.kind === "continue") return work.asker;
  if (work.kind !== "message") return null;
  const { item } = work;
  // A task's child acts for whoever asked for the task (its sender is already `<platform>:<id>`).
  if (item.platform === TASK_PLATFORM) return item.senderId ?? null;
  if (item.senderId !== undefined) return `${item.platform}:${item.senderId}`;
  return `${item.platform}:${item.operator ? "operator" : "api_key"}`;
}

function requesterOf(work: Work): string | null {
  if (work.kind === "continue") return work.requester;
  if (work.kind === "message" && work.item.platform === TASK_PLATFORM) {
    return work.item.senderId ?? null;
  }
  if (work.kind === "message" && work.item.senderId !== undefined) {
    return `${work.item.platform}:${work.item.senderId}`;
  }
  return null;
}
