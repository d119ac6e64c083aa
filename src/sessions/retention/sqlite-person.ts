/**
 * One person's data on SQLite: what `keel user export` writes and `keel user forget` removes.
 * A person is a platform user id; their own chats are the sessions where only they wrote (a DM),
 * shared ones (groups) keep the chat with their messages redacted.
 */
import * as records from "../retention-records.js";
import type { SqliteContext } from "../sqlite-shared.js";
import { markRewrite, sqliteRemoveSession, sqliteSessionHeld } from "./sqlite-remove.js";

const THEIR_INBOX = "SELECT id FROM inbox WHERE platform = @p AND sender_id = @u";
/** Session keys where this person wrote and nobody else did. */
const OWN_KEYS = `SELECT DISTINCT i.session_key FROM inbox i WHERE i.platform = @p AND i.sender_id = @u
  AND NOT EXISTS (SELECT 1 FROM inbox o WHERE o.session_key = i.session_key
                    AND (o.platform <> @p OR o.sender_id IS NOT @u))`;
/** Turns that answered this person's messages. */
const THEIR_TURNS = `SELECT id FROM turns WHERE inbox_id IN (${THEIR_INBOX})
  UNION SELECT turn_id FROM inbox WHERE id IN (${THEIR_INBOX}) AND turn_id IS NOT NULL`;

function bind(person: records.PersonRef) {
  return { p: person.platform, u: person.userId, pu: `${person.platform}:${person.userId}` };
}

interface MessageRow {
  seq: number;
  role: string;
  body: string;
  created_at: number;
}

function transcriptMessages(s: SqliteContext, id: string, own: boolean, person: records.PersonRef) {
  const rows = (
    own
      ? s
          .stmt(
            "SELECT seq, role, body, created_at FROM messages WHERE session_id = ? ORDER BY seq",
          )
          .all(id)
      : s
          .stmt(
            `SELECT seq, role, body, created_at FROM messages WHERE session_id = @id
               AND role IN ('user', 'assistant') AND turn_id IN (${THEIR_TURNS}) ORDER BY seq`,
          )
          .all({ id, ...bind(person) })
  ) as MessageRow[];
  return rows.map((r) => ({
    seq: r.seq,
    role: r.role,
    body: JSON.parse(r.body) as unknown,
    createdAt: r.created_at,
  }));
}

export function sqlitePersonData(s: SqliteContext, person: records.PersonRef): records.PersonData {
  const b = bind(person);
  const ownKeys = new Set(s.stmt(OWN_KEYS).pluck().all(b) as string[]);
  const transcripts: records.PersonTranscript[] = [];
  const own = s
    .stmt(
      `SELECT session_id, session_key FROM transcripts WHERE session_key IN (${OWN_KEYS}) ORDER BY created_at`,
    )
    .all(b) as { session_id: string; session_key: string }[];
  const shared = s
    .stmt(`SELECT DISTINCT session_id, session_key FROM inbox WHERE id IN (${THEIR_INBOX})`)
    .all(b) as { session_id: string; session_key: string }[];
  for (const t of own) {
    const messages = transcriptMessages(s, t.session_id, true, person);
    transcripts.push({ sessionId: t.session_id, sessionKey: t.session_key, own: true, messages });
  }
  for (const t of shared.filter((row) => !ownKeys.has(row.session_key))) {
    const messages = transcriptMessages(s, t.session_id, false, person);
    transcripts.push({ sessionId: t.session_id, sessionKey: t.session_key, own: false, messages });
  }
  const ownIds = own.map((t) => t.session_id);
  const usage = s
    .stmt(
      `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
              COALESCE(SUM(completion_tokens), 0) AS completion FROM model_usage
        WHERE session_id IN (SELECT session_id FROM transcripts WHERE session_key IN (${OWN_KEYS}))`,
    )
    .get(b) as { calls: number; prompt: number; completion: number };
  const rows = <T>(sql: string) => s.stmt(sql).all(b) as T[];
  return {
    person,
    transcripts,
    inbox: rows(
      `SELECT id, chat_id AS "chatId", text, sender_name AS "senderName",
              received_at AS "receivedAt", session_id AS "sessionId"
         FROM inbox WHERE platform = @p AND sender_id = @u ORDER BY id`,
    ),
    outbox: rows(
      `SELECT id, text, kind, state, created_at AS "createdAt" FROM outbox
        WHERE session_key IN (${OWN_KEYS}) ORDER BY id`,
    ),
    pairing: rows(
      `SELECT code, user_name AS "userName", created_at AS "createdAt", approved_at AS "approvedAt"
         FROM pairing WHERE platform = @p AND user_id = @u`,
    ),
    approvals: rows(
      `SELECT id, summary, state, decision, created_at AS "createdAt" FROM approvals
        WHERE requester = @pu OR asker = @pu ORDER BY created_at`,
    ),
    usage: { calls: usage.calls, promptTokens: usage.prompt, completionTokens: usage.completion },
    ownTranscripts: ownIds,
  };
}

/** Shared chats: the chat stays, their words (and the replies to them) do not. */
function redactShared(s: SqliteContext, b: ReturnType<typeof bind>) {
  const touched = s
    .stmt(`SELECT DISTINCT session_id FROM inbox WHERE id IN (${THEIR_INBOX})`)
    .pluck()
    .all(b) as string[];
  // Every message of the turns that answered them: a reply may quote what they said.
  const redacted = s
    .stmt(
      `UPDATE messages SET body = json_set(body, '$.content', @gone)
        WHERE turn_id IN (${THEIR_TURNS})`,
    )
    .run({ ...b, gone: records.FORGOTTEN_TEXT }).changes;
  for (const [table, column] of [
    ["outbox", "text"],
    ["stream_messages", "text"],
    ["tool_calls", "result"],
  ]) {
    s.stmt(`UPDATE ${table} SET ${column} = @gone WHERE turn_id IN (${THEIR_TURNS})`).run({
      ...b,
      gone: records.FORGOTTEN_TEXT,
    });
  }
  for (const id of touched) s.transcripts.forget(id);
  markRewrite(s);
  for (const table of ["media_steps", "idempotency_keys"]) {
    s.stmt(`DELETE FROM ${table} WHERE inbox_id IN (${THEIR_INBOX})`).run(b);
  }
  const inbox = s
    .stmt(
      `UPDATE inbox SET text = @gone, sender_id = NULL, sender_name = NULL, attachments = NULL,
         client_tools = NULL WHERE platform = @p AND sender_id = @u`,
    )
    .run({ ...b, gone: records.FORGOTTEN_TEXT }).changes;
  return { redacted, inbox };
}

export function sqliteForgetPerson(
  s: SqliteContext,
  person: records.PersonRef,
): records.ForgetResult {
  const b = bind(person);
  const ownKeys = s.stmt(OWN_KEYS).pluck().all(b) as string[];
  const waiting = s
    .stmt(
      `SELECT EXISTS(SELECT 1 FROM inbox WHERE platform = @p AND sender_id = @u
                       AND state IN ('pending', 'running'))
           OR EXISTS(SELECT 1 FROM approvals WHERE (requester = @pu OR asker = @pu) AND state = 'pending')`,
    )
    .pluck()
    .get(b) as number;
  const busyKey = ownKeys.find((key) => sqliteSessionHeld(s, key));
  if (waiting === 1 || busyKey !== undefined) {
    return { ok: false, busy: busyKey ?? "a message or approval of theirs is still open" };
  }
  const ownTranscripts = s
    .stmt(`SELECT session_id FROM transcripts WHERE session_key IN (${OWN_KEYS})`)
    .pluck()
    .all(b) as string[];
  const result = records.forgetTally(ownTranscripts);
  for (const key of ownKeys) records.countRemovedSession(result, sqliteRemoveSession(s, key));
  const shared = redactShared(s, b);
  result.redacted = shared.redacted;
  result.inbox += shared.inbox;
  result.pairing = s
    .stmt("DELETE FROM pairing WHERE platform = @p AND user_id = @u")
    .run(b).changes;
  result.approvals += s
    .stmt("DELETE FROM approvals WHERE requester = @pu OR asker = @pu")
    .run(b).changes;
  s.stmt("DELETE FROM approval_grants WHERE asker = @pu").run(b);
  s.stmt("UPDATE sessions SET memory_user = NULL WHERE memory_user = ?").run(
    records.memoryUserOf(person),
  );
  return result;
}
