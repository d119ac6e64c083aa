/**
 * A backlog is one turn: messages that waited for a chat (found in the inbox at start, or queued
 * behind a running turn in `interrupt` mode) are taken together, so that one model call sees them
 * all and one reply answers them, instead of each starting a turn the next one cuts off.
 */
import type { InboxItem } from "../sessions/store.js";
import type { Work } from "./lane.js";
import { isScheduledFire } from "./scheduled-input.js";

/**
 * `first` (about to start) with the messages waiting right behind it in `queue` that may share
 * its turn, which are removed from `queue`. `alone(item)` names messages that need their own
 * turn whatever their neighbours (the API's, answered in their own HTTP response).
 */
export function takeBatch(first: Work, queue: Work[], alone: (item: InboxItem) => boolean): Work {
  if (first.kind !== "message" || first.together === false || !mayJoin(first.item, alone)) {
    return first;
  }
  const joined: InboxItem[] = [];
  while (queue.length > 0) {
    const next = queue[0]!;
    if (next.kind !== "message" || next.together === false) break;
    if (!mayJoin(next.item, alone) || !sameAsker(first.item, next.item)) break;
    joined.push(next.item);
    queue.shift();
  }
  return joined.length === 0 ? first : { ...first, joined: [...(first.joined ?? []), ...joined] };
}

/** Every inbox item a message turn answers, in order. */
export function batchItems(work: Extract<Work, { kind: "message" }>): InboxItem[] {
  return [work.item, ...(work.joined ?? [])];
}

function mayJoin(item: InboxItem, alone: (item: InboxItem) => boolean): boolean {
  return !isScheduledFire(item) && !alone(item);
}

/** Same chat, same sender: approvals and memory follow the person a turn runs for. */
function sameAsker(a: InboxItem, b: InboxItem): boolean {
  return (
    a.platform === b.platform &&
    a.chatId === b.chatId &&
    a.address.threadId === b.address.threadId &&
    a.senderId === b.senderId &&
    Boolean(a.operator) === Boolean(b.operator)
  );
}
