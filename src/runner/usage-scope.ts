/**
 * Whose spend a turn's model calls count as (budgets): the chat it answers, who started it, the
 * scheduled job or background task it runs for. Recorded with each call's usage.
 */
import type { UsageScope } from "../sessions/store.js";
import type { ActiveTurn } from "./lane.js";
import { isScheduledFire } from "./scheduled-input.js";

/** Session keys of scheduled jobs and background tasks end with their name or id. */
const SCHEDULE_SESSION = "agent:main:schedule:";
const TASK_SESSION = "agent:main:task:";

export function usageScopeOf(
  active: Pick<ActiveTurn, "work" | "address" | "requester" | "sessionKey">,
): UsageScope {
  const work = active.work;
  const item = work.kind === "message" ? work.item : null;
  const key = active.sessionKey;
  const schedule =
    item && isScheduledFire(item)
      ? item.chatId
      : key.startsWith(SCHEDULE_SESSION)
        ? key.slice(SCHEDULE_SESSION.length)
        : null;
  const address = active.address;
  return {
    // A job without a chat counts as its own chat (`schedule:<name>`).
    chat: address ? `${address.platform}:${address.chatId}` : null,
    user: active.requester,
    task: key.startsWith(TASK_SESSION) ? key.slice(TASK_SESSION.length) : null,
    schedule,
  };
}
