/** The tables whose rows belong to one transcript (`session_id`) and go with it, besides its messages. */
export const TRANSCRIPT_TABLES = [
  "tool_calls",
  "compactions",
  "approval_grants",
  "session_notices",
  "transcript_stats",
] as const;

/**
 * What is left of a transcript that pruning emptied and no session still names (its messages,
 * tool calls and compactions already pruned): the last of its rows, its own row last.
 */
export const EMPTIED_TRANSCRIPT_TABLES = [
  "approval_grants",
  "session_notices",
  "transcript_stats",
  "transcripts",
] as const;
