/**
 * When a message starts its session afresh instead of continuing it: the restart-loop breaker
 * suspended the session, or its interrupted turn waited longer than auto_resume_freshness.
 */
import type { InboxItem, SessionRecord, SessionStore } from "../sessions/store.js";
import { SUSPENDED_NOTICE } from "./lifecycle-texts.js";
import type { Replies } from "./replies.js";
import { TEXT } from "./texts.js";

export interface Freshness {
  store: Pick<SessionStore, "resetSession">;
  replies: Replies;
  /** auto_resume_freshness in milliseconds; 0: never fresh. */
  windowMs: number;
  now: number;
}

/** Whether an interrupted session waited too long to continue where it left off. */
export function isStale(session: SessionRecord, { windowMs, now }: Freshness): boolean {
  const markedAt = session.resumeMarkedAt ?? session.updatedAt;
  // The same window as the resume planner's isFresh.
  return windowMs <= 0 || now - markedAt >= windowMs;
}

/**
 * A suspended session, or one whose interruption is older than the freshness window, starts a
 * fresh transcript on its next message, with a notice unless the session was already told (a
 * suspension names the dropped request when it happens); true when it was reset. A fresh
 * resume-pending session keeps its transcript (its mark clears when a turn succeeds).
 */
export async function startAfresh(
  host: Freshness,
  item: InboxItem,
  session: SessionRecord,
): Promise<boolean> {
  const stale = session.resumePending && isStale(session, host);
  if (!session.suspended && !stale) return false;
  await host.store.resetSession(item.sessionKey);
  const notice = !session.suspended
    ? TEXT.stale
    : session.requestNotice === "dropped"
      ? null
      : SUSPENDED_NOTICE;
  if (notice) await host.replies.notice(item.sessionKey, item.address, notice);
  return true;
}
