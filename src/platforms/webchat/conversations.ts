/** The web chat's conversations as its sidebar lists them, each titled by its first message. */
import type { PlatformDataStore, ReportingStore } from "../../sessions/store.js";
import {
  type ConversationSummary,
  channelFor,
  conversationIdOf,
  type DurablePayload,
} from "./protocol.js";

const TITLE_MAX = 200;

/** What the web chat needs of the store. */
export type WebchatStore = Pick<PlatformDataStore, "appendChannelEvent" | "listChannelEvents"> &
  Pick<ReportingStore, "listSessions">;

/** The latest 200 web chat conversations, newest first. */
export async function listConversations(store: WebchatStore): Promise<ConversationSummary[]> {
  const sessions = await store.listSessions({ platform: "webchat", limit: 200 });
  const list: ConversationSummary[] = [];
  for (const s of sessions) {
    const conversationId = conversationIdOf(s.key);
    if (!conversationId) continue;
    list.push({
      conversation_id: conversationId,
      session_id: s.sessionId,
      title: await title(store, conversationId),
      message_count: s.messageCount,
      last_message: s.lastMessage,
      resume_pending: s.resumePending,
      suspended: s.suspended,
      updated_at: s.updatedAt,
    });
  }
  return list;
}

/** The text of the first user event among the first few of a conversation. */
async function title(store: WebchatStore, conversationId: string): Promise<string | null> {
  const events = await store.listChannelEvents(channelFor(conversationId), 0, 8);
  for (const row of events) {
    const payload = row.payload as Partial<DurablePayload> | null;
    if (payload?.kind === "user" && typeof payload.text === "string") {
      return payload.text.slice(0, TITLE_MAX);
    }
  }
  return null;
}
