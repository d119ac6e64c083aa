/**
 * One person's data on Postgres: what `keel user export` writes and `keel user forget` removes
 * (the same rules as sqlite-person.ts). Parameters: $1 platform, $2 user id, $3 `platform:id`.
 */
import { all, type Db, first } from "../pg-shared.js";
import * as records from "../retention-records.js";
import { pgRemoveSession, pgSessionHeld, pgRun as run } from "./pg-remove.js";

const THEIR_INBOX = "SELECT id FROM inbox WHERE platform = $1 AND sender_id = $2";
/** Session keys where this person wrote and nobody else did. */
const OWN_KEYS = `SELECT DISTINCT i.session_key FROM inbox i WHERE i.platform = $1 AND i.sender_id = $2
  AND NOT EXISTS (SELECT 1 FROM inbox o WHERE o.session_key = i.session_key
                    AND (o.platform <> $1 OR o.sender_id IS DISTINCT FROM $2))`;
/** Turns that answered this person's messages. */
const THEIR_TURNS = `SELECT id FROM turns WHERE inbox_id IN (${THEIR_INBOX})
  UNION SELECT turn_id FROM inbox WHERE id IN (${THEIR_INBOX}) AND turn_id IS NOT NULL`;

const params = (p: records.PersonRef) => [p.platform, p.userId, `${p.platform}:${p.userId}`];

async function transcriptMessages(db: Db, id: string, own: boolean, person: records.PersonRef) {
  const rows = own
    ? await all<{ seq: number; role: string; body: string; created_at: number }>(
        db,
        "SELECT seq, role, body, created_at FROM messages WHERE session_id = $1 ORDER BY seq",
        [id],
      )
    : await all<{ seq: number; role: string; body: string; created_at: number }>(
        db,
        `SELECT seq, role, body, created_at FROM messages WHERE session_id = $3
           AND role IN ('user', 'assistant') AND turn_id IN (${THEIR_TURNS}) ORDER BY seq`,
        [person.platform, person.userId, id],
      );
  return rows.map((r) => ({
    seq: Number(r.seq),
    role: r.role,
    body: JSON.parse(r.body) as unknown,
    createdAt: Number(r.created_at),
  }));
}

export async function pgPersonData(db: Db, person: records.PersonRef): Promise<records.PersonData> {
  const p = params(person);
  const ownKeys = new Set(
    (await all<{ session_key: string }>(db, OWN_KEYS, p.slice(0, 2))).map((r) => r.session_key),
  );
  const own = await all<{ session_id: string; session_key: string }>(
    db,
    `SELECT session_id, session_key FROM transcripts WHERE session_key IN (${OWN_KEYS})
      AND $3::text IS NOT NULL ORDER BY created_at`,
    p,
  );
  const shared = await all<{ session_id: string; session_key: string }>(
    db,
    `SELECT DISTINCT session_id, session_key FROM inbox WHERE id IN (${THEIR_INBOX}) AND $3::text IS NOT NULL`,
    p,
  );
  const transcripts: records.PersonTranscript[] = [];
  for (const t of own) {
    const messages = await transcriptMessages(db, t.session_id, true, person);
    transcripts.push({ sessionId: t.session_id, sessionKey: t.session_key, own: true, messages });
  }
  for (const t of shared.filter((row) => !ownKeys.has(row.session_key))) {
    const messages = await transcriptMessages(db, t.session_id, false, person);
    transcripts.push({ sessionId: t.session_id, sessionKey: t.session_key, own: false, messages });
  }
  const usage = await first<Record<string, string>>(
    db,
    `SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
            COALESCE(SUM(completion_tokens), 0) AS completion FROM model_usage
      WHERE session_id IN (SELECT session_id FROM transcripts WHERE session_key IN (${OWN_KEYS}))
        AND $3::text IS NOT NULL`,
    p,
  );
  const rows = <T>(sql: string) => all<T>(db, sql, p);
  return {
    person,
    transcripts,
    inbox: await rows(
      `SELECT id, chat_id AS "chatId", text, sender_name AS "senderName",
              received_at AS "receivedAt", session_id AS "sessionId"
         FROM inbox WHERE platform = $1 AND sender_id = $2 AND $3::text IS NOT NULL ORDER BY id`,
    ),
    outbox: await rows(
      `SELECT id, text, kind, state, created_at AS "createdAt" FROM outbox
        WHERE session_key IN (${OWN_KEYS}) AND $3::text IS NOT NULL ORDER BY id`,
    ),
    pairing: await rows(
      `SELECT code, user_name AS "userName", created_at AS "createdAt", approved_at AS "approvedAt"
         FROM pairing WHERE platform = $1 AND user_id = $2 AND $3::text IS NOT NULL`,
    ),
    approvals: await rows(
      `SELECT id, summary, state, decision, created_at AS "createdAt" FROM approvals
        WHERE (requester = $3 OR asker = $3) AND $1::text IS NOT NULL AND $2::text IS NOT NULL
        ORDER BY created_at`,
    ),
    usage: {
      calls: Number(usage?.calls ?? 0),
      promptTokens: Number(usage?.prompt ?? 0),
      completionTokens: Number(usage?.completion ?? 0),
    },
    ownTranscripts: own.map((t) => t.session_id),
  };
}

/** Shared chats: the chat stays, their words (and the replies to them) do not. */
async function redactShared(db: Db, pu: string[]) {
  // Every message of the turns that answered them: a reply may quote what they said.
  const redacted = await run(
    db,
    `UPDATE messages SET body = jsonb_set(body::jsonb, '{content}', to_jsonb($3::text))::text
      WHERE turn_id IN (${THEIR_TURNS})`,
    [...pu, records.FORGOTTEN_TEXT],
  );
  for (const [table, column] of [
    ["outbox", "text"],
    ["stream_messages", "text"],
    ["tool_calls", "result"],
  ]) {
    await run(db, `UPDATE ${table} SET ${column} = $3 WHERE turn_id IN (${THEIR_TURNS})`, [
      ...pu,
      records.FORGOTTEN_TEXT,
    ]);
  }
  for (const table of ["media_steps", "idempotency_keys"]) {
    await run(db, `DELETE FROM ${table} WHERE inbox_id IN (${THEIR_INBOX})`, pu);
  }
  const inbox = await run(
    db,
    `UPDATE inbox SET text = $3, sender_id = NULL, sender_name = NULL, attachments = NULL,
       client_tools = NULL WHERE platform = $1 AND sender_id = $2`,
    [...pu, records.FORGOTTEN_TEXT],
  );
  return { redacted, inbox };
}

export async function pgForgetPerson(
  db: Db,
  person: records.PersonRef,
): Promise<records.ForgetResult> {
  const p = params(person);
  // Their chats and rows are locked against a message arriving meanwhile.
  await db.query("SELECT pg_advisory_xact_lock(hashtext('keel:forget:' || $1))", [p[2]]);
  const ownKeys = (await all<{ session_key: string }>(db, OWN_KEYS, p.slice(0, 2))).map(
    (r) => r.session_key,
  );
  const waiting = await first<{ open: boolean }>(
    db,
    `SELECT EXISTS(SELECT 1 FROM inbox WHERE platform = $1 AND sender_id = $2
                     AND state IN ('pending', 'running'))
         OR EXISTS(SELECT 1 FROM approvals WHERE (requester = $3 OR asker = $3) AND state = 'pending')
         AS open`,
    p,
  );
  let busyKey: string | undefined;
  for (const key of ownKeys) if (!busyKey && (await pgSessionHeld(db, key))) busyKey = key;
  if (waiting?.open || busyKey !== undefined) {
    return { ok: false, busy: busyKey ?? "a message or approval of theirs is still open" };
  }
  const ownTranscripts = (
    await all<{ session_id: string }>(
      db,
      "SELECT session_id FROM transcripts WHERE session_key = ANY($1::text[])",
      [ownKeys],
    )
  ).map((r) => r.session_id);
  const result = records.forgetTally(ownTranscripts);
  for (const key of ownKeys) records.countRemovedSession(result, await pgRemoveSession(db, key));
  const pu = p.slice(0, 2);
  const shared = await redactShared(db, pu);
  result.redacted = shared.redacted;
  result.inbox += shared.inbox;
  result.pairing = await run(db, "DELETE FROM pairing WHERE platform = $1 AND user_id = $2", pu);
  result.approvals += await run(db, "DELETE FROM approvals WHERE requester = $1 OR asker = $1", [
    p[2],
  ]);
  await run(db, "DELETE FROM approval_grants WHERE asker = $1", [p[2]]);
  await run(db, "UPDATE sessions SET memory_user = NULL WHERE memory_user = $1", [
    records.memoryUserOf(person),
  ]);
  return result;
}
