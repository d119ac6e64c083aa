/** The tables whose rows belong to one transcript (`session_id`) and go with it, besides its messages. */
export const TRANSCRIPT_TABLES = [
  "tool_calls",
  "compactions",
  "approval_grants",
  "session_notices",
  "transcript_stats",
] as const;
