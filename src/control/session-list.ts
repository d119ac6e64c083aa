/**
 * `GET /api/sessions` as the dashboard reads it: each session with a title a person recognises
 * (the chat's name, or its first message), what it is doing now, and its tokens (and cost, when
 * `model.prices` is set); Keel's own lanes (`system:…`) only on request; and the totals.
 */
import { isoTime } from "../lib/wire-time.js";
import type {
  ApprovalRecord,
  ReportingStore,
  SessionSummary,
  UsageTotals,
} from "../sessions/store.js";

export interface SessionListDeps {
  store: ReportingStore;
  /** Session keys with a turn running now. */
  runningKeys(): string[];
  pendingApprovals(): Promise<ApprovalRecord[]>;
  /** `model.prices`: dollars (or any currency) per million tokens. */
  prices?: { input_per_mtok: number; output_per_mtok: number } | undefined;
}

/** What a session is doing, most urgent first. */
export type SessionState =
  | "awaiting approval"
  | "running"
  | "suspended"
  | "resume pending"
  | "idle";

export async function listSessionsJson(
  deps: SessionListDeps,
  options: { limit: number; internal: boolean },
) {
  const [sessions, pending, total] = await Promise.all([
    deps.store.listSessions({ limit: options.limit, internal: options.internal }),
    deps.pendingApprovals(),
    deps.store.totalUsage(),
  ]);
  const running = new Set(deps.runningKeys());
  const waiting = new Set(pending.map((a) => a.sessionId));
  const cost = (prompt: number, completion: number) =>
    deps.prices
      ? (prompt * deps.prices.input_per_mtok + completion * deps.prices.output_per_mtok) / 1e6
      : null;
  return {
    sessions: sessions.map((s) => ({
      key: s.key,
      session_id: s.sessionId,
      title: titleOf(s),
      chat_name: s.chatName,
      first_message: s.firstMessage,
      platform: s.platform,
      state: stateOf(s, running.has(s.key), waiting.has(s.sessionId)),
      message_count: s.messageCount,
      last_message: s.lastMessage,
      resume_pending: s.resumePending,
      suspended: s.suspended,
      usage: {
        prompt_tokens: s.promptTokens,
        completion_tokens: s.completionTokens,
        cost: cost(s.promptTokens, s.completionTokens),
      },
      updated_at: isoTime(s.updatedAt),
    })),
    total_usage: totalJson(total, cost),
  };
}

function totalJson(total: UsageTotals, cost: (p: number, c: number) => number | null) {
  return {
    calls: total.calls,
    prompt_tokens: total.promptTokens,
    completion_tokens: total.completionTokens,
    estimated_calls: total.estimatedCalls,
    cost: cost(total.promptTokens, total.completionTokens),
  };
}

/**
 * A direct chat is named after the person in it; any other chat (a group, the web chat, an API
 * client) after its first message, which says what it is about. The key is the last resort.
 */
function titleOf(s: SessionSummary): string {
  if (s.chatName && s.key.includes(":dm:")) return s.chatName;
  return s.firstMessage ?? s.chatName ?? s.key;
}

function stateOf(s: SessionSummary, running: boolean, awaiting: boolean): SessionState {
  if (awaiting) return "awaiting approval";
  if (running) return "running";
  if (s.suspended) return "suspended";
  if (s.resumePending) return "resume pending";
  return "idle";
}
