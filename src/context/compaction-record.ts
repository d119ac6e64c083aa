/**
 * How a compaction reaches the store: the keeper counts the user and assistant messages its
 * summary covers; here that count becomes the transcript position (`through_seq`) the summary
 * stands in for, and the summary is recorded in one transaction. A crash before the commit
 * leaves the previous history in force, after it the compacted one: never half.
 */
import type { ChatMessage, CompactionSink } from "../agent/types.js";
import type { CrashPoint } from "../lib/crash-point.js";
import type { CompactionRecord, StoredMessage, TurnStore, UsageScope } from "../sessions/store.js";

/** The stored messages a compaction has not replaced, in order. */
export function visibleMessages(
  stored: readonly StoredMessage[],
  compaction: Pick<CompactionRecord, "throughSeq"> | null,
): ChatMessage[] {
  const through = compaction?.throughSeq ?? 0;
  return stored.filter((m) => m.seq > through).map((m) => m.message);
}

export function createCompactionSink(options: {
  store: TurnStore;
  sessionId: string;
  turnId: number | null;
  crashPoint?: CrashPoint;
  /** Whose spend the summarising call counts as (budgets). */
  scope?: UsageScope;
}): CompactionSink {
  const { store, sessionId, turnId } = options;
  return {
    async record(input) {
      const spoken = (await store.loadTurnHistory(sessionId)).messages.filter(
        (m) => m.message.role === "user" || m.message.role === "assistant",
      );
      const firstKept = spoken[input.coveredCount];
      if (firstKept?.message.role !== "user") return false;
      options.crashPoint?.("mid_compaction");
      await store.recordCompaction({
        sessionId,
        turnId,
        throughSeq: firstKept.seq - 1,
        summary: input.summary,
        tokensBefore: input.tokensBefore,
        tokensAfter: input.tokensAfter,
        usage:
          input.usage && options.scope ? { ...input.usage, scope: options.scope } : input.usage,
      });
      options.crashPoint?.("after_compaction");
      return true;
    },
  };
}
