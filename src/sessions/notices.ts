/**
 * Queues a notice (a lifecycle or command message outside a turn) on its chat's lane, through the
 * store's ordinary methods: the gateway's greetings, the stop notices and the runner's answers all
 * come here. The SQLite store's pairing approval writes its notice in its own transaction instead.
 */
import type { ChatAddress } from "../contract/platform.js";
import { noticeSessionKey } from "./session-id.js";
import type { OutboxItem, OutboxStore, SessionStore } from "./store.js";

export interface NoticeInput {
  address: ChatAddress;
  text: string;
  /** The lane it belongs to; default the chat's notice lane (`noticeSessionKey`). */
  sessionKey?: string;
  /** The caller sends it itself right away (state `sending`): the dispatcher never will. */
  direct?: boolean;
  /** The approval it asks for (chat platforms add buttons). */
  approvalId?: string;
}

export async function queueNotice(
  store: SessionStore & OutboxStore,
  input: NoticeInput,
): Promise<OutboxItem> {
  const { address, text } = input;
  const sessionKey = input.sessionKey ?? noticeSessionKey(address);
  const session = await store.ensureSession(sessionKey, address);
  return store.enqueueOutbox({
    sessionKey,
    sessionId: session.sessionId,
    address,
    text,
    kind: "notice",
    ...(input.direct && { direct: true }),
    ...(input.approvalId && { approvalId: input.approvalId }),
  });
}
