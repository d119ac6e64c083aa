/**
 * What the runner says back without a turn: an inbox item answered and closed, a notice in a
 * chat, a message refused while the gateway stops or drains (told to listeners as well).
 */
import type { ChatAddress, Refusal } from "../contract/platform.js";
import { queueNotice } from "../sessions/notices.js";
import type { InboxItem } from "../sessions/store.js";
import type { EventFanout } from "./events.js";
import { DRAIN_REFUSAL, notAcceptingText, queuedForAfterRestartText } from "./lifecycle-texts.js";
import type { RunnerOptions } from "./runner-options.js";
import { isDetachedAddress } from "./scheduled-input.js";

export class Replies {
  constructor(
    private readonly options: Pick<RunnerOptions, "store" | "onReplyQueued" | "busyInputMode">,
    private readonly events: EventFanout,
  ) {}

  /** Replies to an inbox item with a notice and closes it. */
  async answer(item: InboxItem, text: string, state: "done" | "cancelled"): Promise<void> {
    const to = isDetachedAddress(item.address) ? undefined : text;
    await this.options.store.closeInboxItem(item.id, state, to);
    this.options.onReplyQueued();
  }

  async notice(sessionKey: string, address: ChatAddress, text: string): Promise<void> {
    if (isDetachedAddress(address)) return;
    await queueNotice(this.options.store, { sessionKey, address, text });
    this.options.onReplyQueued();
  }

  async refuseWhileStopping(
    item: InboxItem,
    busy: boolean,
    refusal: "stopping" | "restarting",
  ): Promise<void> {
    const restarting = refusal === "restarting";
    if (busy && this.options.busyInputMode === "queue") {
      // Stays `pending` in the inbox: the next process runs it after the resume.
      await this.notice(item.sessionKey, item.address, queuedForAfterRestartText(restarting));
      return;
    }
    await this.refuse(item, refusal);
  }

  /** Answers a message the gateway does not take now with why, closes it, and tells listeners. */
  async refuse(item: InboxItem, refusal: "draining" | "stopping" | "restarting") {
    const text =
      refusal === "draining" ? DRAIN_REFUSAL : notAcceptingText(refusal === "restarting");
    await this.answer(item, text, "cancelled");
    this.emitRefused(item, refusal);
  }

  /** Tells listeners a stored message was refused (after its text reply was stored). */
  emitRefused(item: InboxItem, refusal: Refusal): void {
    this.events.emit({
      type: "refused",
      sessionKey: item.sessionKey,
      sessionId: item.sessionId,
      inboxId: item.id,
      refusal,
    });
  }
}
