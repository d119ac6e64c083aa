/** Per-session-key state held by the runner: the running turn and the work waiting behind it. */
import type { ChatAddress } from "../platforms/platform.js";
import type { InboxItem, SessionRecord } from "../sessions/store.js";

export type Work =
  | { kind: "message"; item: InboxItem }
  | { kind: "resume"; session: SessionRecord }
  | { kind: "retry"; text: string; address: ChatAddress; sessionKey: string };

export type AbortCause = "interrupt" | "user_stop" | "new_session" | "shutdown";

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
  work: Work;
  done: Promise<void>;
}

export interface Lane {
  active: ActiveTurn | null;
  queue: Work[];
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
    work,
    done: Promise.resolve(),
  };
}
