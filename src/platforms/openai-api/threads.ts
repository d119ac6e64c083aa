/**
 * Stateless clients: stock OpenAI clients send the whole conversation with every request and no
 * `X-Session-Id`. A request whose earlier messages are a conversation this credential already
 * has continues that session: each stateless request records its thread (a hash of its
 * credential and its user messages), and the next request of the conversation names the same
 * thread with the messages before its new one; the assistant's last answer must match too, so
 * two conversations that happen to share their questions stay apart. Anything else starts one.
 */
import { createHash, randomUUID } from "node:crypto";
import type { ClientToolResult } from "../../contract/platform.js";
import type { Granted } from "../../control/access.js";
import type { InboxStore, SessionStore, TurnStore } from "../../sessions/store.js";
import { maySeeSession } from "./session-credential.js";
import { messageText, userTexts } from "./wire.js";

/** The session a request goes to. */
export interface StatelessTarget {
  key: string;
  /** The transcript it continues (absent for a new session). */
  sessionId?: string;
  fresh: boolean;
  /** The thread this request records (stateless requests only). */
  thread?: string;
}

type WireMessage = Parameters<typeof messageText>[0] & { role: string };

export class Threads {
  constructor(
    private readonly store: Pick<InboxStore, "findThread"> &
      Pick<SessionStore, "getSessionById"> &
      Pick<TurnStore, "loadTranscript">,
  ) {}

  /** The stored session a stateless request extends, or a new one. */
  async resolve(
    messages: WireMessage[],
    results: ClientToolResult[],
    granted: Granted,
    credential: string,
  ): Promise<StatelessTarget> {
    const thread = threadId(credential, userTexts(messages));
    const fresh = { key: `agent:main:api:${randomUUID()}`, fresh: true, thread };
    // Results add no user message: their thread is the one of the request that got the calls.
    const earlier = results.length > 0 ? messages : messages.slice(0, -1);
    const answer = lastAssistantText(earlier);
    if (answer === null) return fresh;
    const found = await this.store.findThread(threadId(credential, userTexts(earlier)));
    if (!found) return fresh;
    const session = await this.store.getSessionById(found.sessionId);
    if (!session || session.key !== found.sessionKey) return fresh;
    if (!maySeeSession(granted, credential, session.credential)) return fresh;
    if (results.length === 0 && !(await this.answered(session.sessionId, answer))) return fresh;
    return { key: session.key, sessionId: session.sessionId, fresh: false, thread };
  }

  /** Ids of the tool calls the transcript's last assistant message holds without a result. */
  async openCalls(sessionId: string): Promise<Set<string>> {
    const stored = (await this.store.loadTranscript(sessionId)).map((s) => s.message);
    const index = stored.findLastIndex((m) => m.role === "assistant");
    const asking = stored[index];
    if (asking?.role !== "assistant" || !asking.tool_calls) return new Set();
    const open = new Set(asking.tool_calls.map((call) => call.id));
    for (const m of stored.slice(index + 1)) if (m.role === "tool") open.delete(m.tool_call_id);
    return open;
  }

  /**
   * Whether the transcript's answer to its last user message is `text`: its final reply, or
   * (as a streaming client collects it) everything the assistant wrote since that message.
   */
  private async answered(sessionId: string, text: string): Promise<boolean> {
    const stored = (await this.store.loadTranscript(sessionId)).map((s) => s.message);
    const since = stored.slice(stored.findLastIndex((m) => m.role === "user") + 1);
    const written = since.flatMap((m) =>
      m.role === "assistant" && typeof m.content === "string" && m.content ? [m.content] : [],
    );
    const wanted = text.trim();
    return (
      written.length > 0 &&
      (written.at(-1)!.trim() === wanted || written.join("").trim() === wanted)
    );
  }
}

/** The text of the last assistant message, or null when there is none. */
function lastAssistantText(messages: WireMessage[]): string | null {
  const last = messages.findLast((m) => m.role === "assistant");
  return last ? messageText(last) : null;
}

/** A conversation of one credential, named by its user messages (never stored in clear). */
function threadId(credential: string, texts: string[]): string {
  return createHash("sha256")
    .update(`keel api thread\0${credential}\0${JSON.stringify(texts)}`)
    .digest("hex");
}
