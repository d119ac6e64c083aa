/**
 * Versioned schema migrations for the Postgres store, numbered like SQLite's: entry N makes the
 * same change as entry N of `sqlite-migrations.ts`, in Postgres's dialect (BIGINT epoch-ms times
 * and identity ids, BOOLEAN flags, JSON kept as TEXT so both stores share one row mapping).
 * `keel_schema_version` records how far a database has come. Never edit a shipped migration: add
 * a new one, at the same index as its SQLite twin.
 */
export const PG_MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE sessions (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    platform TEXT,
    origin TEXT,
    resume_pending BOOLEAN NOT NULL DEFAULT FALSE,
    resume_reason TEXT,
    resume_marked_at BIGINT,
    interrupt_count INTEGER NOT NULL DEFAULT 0,
    suspended BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE INDEX sessions_updated ON sessions(updated_at);

  CREATE TABLE transcripts (
    session_id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT,
    created_at BIGINT NOT NULL
  );

  CREATE TABLE messages (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id BIGINT,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX messages_session ON messages(session_id, seq);

  CREATE TABLE inbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    platform_message_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    text TEXT NOT NULL,
    sender_id TEXT,
    sender_name TEXT,
    address TEXT NOT NULL,
    state TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    UNIQUE (platform, chat_id, platform_message_id)
  );
  CREATE INDEX inbox_open ON inbox(state) WHERE state IN ('pending', 'running');

  CREATE TABLE turns (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    inbox_id BIGINT,
    state TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    finished_at BIGINT
  );
  CREATE INDEX turns_running ON turns(state) WHERE state = 'running';

  CREATE TABLE tool_calls (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tool_call_id TEXT NOT NULL,
    turn_id BIGINT NOT NULL,
    session_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    UNIQUE (turn_id, tool_call_id)
  );
  CREATE INDEX tool_calls_open ON tool_calls(session_id) WHERE state = 'started';

  CREATE TABLE outbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id BIGINT,
    platform TEXT NOT NULL,
    address TEXT NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT
  );
  CREATE INDEX outbox_pending ON outbox(platform) WHERE state = 'pending';

  CREATE TABLE pairing (
    code TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT,
    chat_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    approved_at BIGINT
  );
  CREATE INDEX pairing_user ON pairing(platform, user_id);

  CREATE TABLE channel_events (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX channel_events_channel ON channel_events(channel, seq);
  `,
  // 2: operator rights of an inbox message's sender.
  `ALTER TABLE inbox ADD COLUMN operator BOOLEAN NOT NULL DEFAULT FALSE;`,
  // 3: idempotency keys of the OpenAI-compatible API, and the links a repeat follows to its answer.
  `
  CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    inbox_id BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (scope, idempotency_key)
  );
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);

  ALTER TABLE outbox ADD COLUMN inbox_id BIGINT;
  CREATE INDEX outbox_inbox ON outbox(inbox_id) WHERE inbox_id IS NOT NULL;
  CREATE INDEX outbox_turn ON outbox(turn_id) WHERE turn_id IS NOT NULL;
  CREATE INDEX turns_inbox ON turns(inbox_id) WHERE inbox_id IS NOT NULL;
  `,
  // 4: scheduled jobs.
  `
  CREATE TABLE schedule_jobs (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    expr TEXT NOT NULL,
    tz TEXT,
    prompt TEXT NOT NULL,
    session_key TEXT NOT NULL,
    chat TEXT,
    misfire TEXT NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    paused_reason TEXT,
    next_fire_at BIGINT,
    last_fire_at BIGINT,
    last_fired_late_ms BIGINT,
    failures INTEGER NOT NULL DEFAULT 0,
    created_by TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE INDEX schedule_jobs_due ON schedule_jobs(next_fire_at) WHERE NOT paused;
  `,
  // 5: the notice given about a session's unanswered request since its last answered turn.
  `ALTER TABLE sessions ADD COLUMN request_notice TEXT;`,
  // 6: chat messages that show a turn's reply while it streams.
  `
  CREATE TABLE stream_messages (
    turn_id BIGINT NOT NULL,
    piece INTEGER NOT NULL,
    platform TEXT NOT NULL,
    address TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (turn_id, piece)
  );
  CREATE INDEX stream_messages_open ON stream_messages(platform, state) WHERE state = 'open';
  CREATE INDEX stream_messages_updated ON stream_messages(updated_at);
  `,
  // 7: durable state of platform adapters (JSON per key).
  `
  CREATE TABLE platform_state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at BIGINT NOT NULL
  );
  CREATE INDEX inbox_platform_received ON inbox(platform, received_at);
  `,
  // 8: approvals (a tool call waiting for a human) and per-transcript grants. `seq` orders rows
  // created in the same millisecond (SQLite uses its rowid).
  `
  CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id BIGINT NOT NULL,
    tool_call_id TEXT NOT NULL,
    tool_name TEXT NOT NULL,
    summary TEXT NOT NULL,
    rule TEXT NOT NULL,
    reason TEXT NOT NULL,
    address TEXT,
    requester TEXT,
    state TEXT NOT NULL,
    decision TEXT,
    decided_by TEXT,
    created_at BIGINT NOT NULL,
    deadline_at BIGINT NOT NULL,
    decided_at BIGINT
  );
  CREATE INDEX approvals_call ON approvals(session_id, tool_call_id);
  CREATE INDEX approvals_pending ON approvals(deadline_at) WHERE state = 'pending';
  CREATE TABLE approval_grants (
    session_id TEXT NOT NULL,
    rule TEXT NOT NULL,
    granted_by TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, rule)
  );
  ALTER TABLE outbox ADD COLUMN approval_id TEXT;
  `,
  // 9: compactions, tokens used per model call, the model a session chose, its memory user.
  `
  CREATE TABLE compactions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id BIGINT,
    through_seq BIGINT NOT NULL,
    summary TEXT NOT NULL,
    tokens_before BIGINT NOT NULL,
    tokens_after BIGINT NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX compactions_session ON compactions(session_id, id);

  CREATE TABLE model_usage (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id BIGINT,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    estimated BOOLEAN NOT NULL,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX model_usage_session ON model_usage(session_id, id);

  ALTER TABLE sessions ADD COLUMN model TEXT;
  ALTER TABLE sessions ADD COLUMN memory_user TEXT;
  `,
  // 10: the files a message came with, media steps recorded once, files the agent sent (and the
  // outbox row that sends one), notices given once per transcript.
  `
  ALTER TABLE inbox ADD COLUMN attachments TEXT;
  CREATE TABLE media_steps (
    inbox_id BIGINT NOT NULL,
    step TEXT NOT NULL,
    result TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (inbox_id, step)
  );
  CREATE TABLE sent_files (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    mime TEXT NOT NULL,
    size BIGINT NOT NULL,
    created_at BIGINT NOT NULL
  );
  ALTER TABLE outbox ADD COLUMN file_id TEXT;
  CREATE TABLE session_notices (
    session_id TEXT NOT NULL,
    notice TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, notice)
  );
  `,
  // 11: the gateways sharing the database, and per-session leases with their fence. Lease and
  // heartbeat times come from the database's clock, never an instance's.
  `
  CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
  );
  CREATE TABLE session_leases (
    session_key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    fence BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
  );
  CREATE INDEX session_leases_owner ON session_leases(owner);
  `,
  // 12: which gateway accepted each inbox row (adoptPendingInbox) and queued each outbox row.
  `
  ALTER TABLE inbox ADD COLUMN accepted_by TEXT;
  ALTER TABLE outbox ADD COLUMN queued_by TEXT;
  `,
  // 13 (issue 33, personal grants): who asked for each approval (the person, or the /v1
  // credential) and the units "approve for session" grants (JSON list of normalized commands);
  // grants belong to that asker in that transcript. Earlier grants were session-wide and
  // program-wide: they are dropped, and those commands ask again once.
  `
  ALTER TABLE approvals ADD COLUMN asker TEXT;
  ALTER TABLE approvals ADD COLUMN grants TEXT;
  DROP TABLE approval_grants;
  CREATE TABLE approval_grants (
    session_id TEXT NOT NULL,
    asker TEXT NOT NULL,
    grant_unit TEXT NOT NULL,
    granted_by TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, asker, grant_unit)
  );
  `,
  // 14: the credential a session was created under (never the secret itself).
  `ALTER TABLE sessions ADD COLUMN credential TEXT;`,
  // 15 (issue 34, a backlog is one turn): the turn that took an inbox row together with others,
  // so that the turn's end closes them all and an answer is found from any of them.
  `
  ALTER TABLE inbox ADD COLUMN turn_id BIGINT;
  CREATE INDEX inbox_turn ON inbox(turn_id) WHERE turn_id IS NOT NULL;
  `,
  // 16 (issue 43): the platforms each gateway delivers to (JSON array; NULL: not said, taken as all).
  `
  ALTER TABLE instances ADD COLUMN platforms TEXT;
  `,
  // 17 (issue 34): /v1 client tools and stateless conversations. An inbox row keeps the
  // functions the client offered (and the results of its calls it carried), a session the
  // functions of its latest request (a resumed turn offers them again); `thread` (a hash of the
  // credential and the user messages a stateless request carried) finds the session a later
  // request extends.
  `
  ALTER TABLE inbox ADD COLUMN client_tools TEXT;
  ALTER TABLE inbox ADD COLUMN thread TEXT;
  CREATE INDEX inbox_thread ON inbox(thread);
  ALTER TABLE sessions ADD COLUMN client_tools TEXT;
  `,
  // 18 (issue 36): tasks, work handed to a child session by `delegate` or `/bg`. One task per
  // delegate call ever (the unique index), its chat, its life and whether its ended result is
  // already in the parent's transcript (`noted`).
  `
  CREATE TABLE tasks (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    parent_session_key TEXT NOT NULL,
    parent_session_id TEXT NOT NULL,
    parent_tool_call_id TEXT,
    root_session_id TEXT NOT NULL,
    child_key TEXT NOT NULL,
    chat_platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    chat TEXT NOT NULL,
    requester TEXT,
    prompt TEXT NOT NULL,
    context TEXT,
    depth INTEGER NOT NULL,
    background BOOLEAN NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    noted BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
  );
  CREATE UNIQUE INDEX tasks_call ON tasks(parent_session_id, parent_tool_call_id)
    WHERE parent_tool_call_id IS NOT NULL;
  CREATE INDEX tasks_chat ON tasks(chat_platform, chat_id, state);
  CREATE INDEX tasks_root ON tasks(root_session_id);
  CREATE INDEX tasks_parent ON tasks(parent_session_key) WHERE NOT noted;
  `,
  // 19 (issue 40, budgets): whose spend each model call counts for (chat, user, task, schedule
  // keys, each when known), read per period by time; budget pauses, answered like approvals.
  `
  ALTER TABLE model_usage ADD COLUMN chat_key TEXT;
  ALTER TABLE model_usage ADD COLUMN user_key TEXT;
  ALTER TABLE model_usage ADD COLUMN task_key TEXT;
  ALTER TABLE model_usage ADD COLUMN schedule_key TEXT;
  CREATE INDEX model_usage_created ON model_usage(created_at);
  CREATE TABLE budget_pauses (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id BIGINT,
    budget_id TEXT NOT NULL,
    scope_key TEXT,
    period_start BIGINT NOT NULL,
    period_end BIGINT NOT NULL,
    summary TEXT NOT NULL,
    address TEXT,
    requester TEXT,
    state TEXT NOT NULL,
    decided_by TEXT,
    decided_at BIGINT,
    applied BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL
  );
  CREATE INDEX budget_pauses_state ON budget_pauses(state, period_end);
  CREATE INDEX budget_pauses_session ON budget_pauses(session_id);
  `,
  // 20 (issue 42, the same speed after a year): what the status and the session list count is
  // kept as it is written, instead of counted over every row on each read (both grew with age).
  // Triggers keep the sums in 16 shards (by the row), so that gateways writing at once do not
  // queue on one row; readers add the shards. Model calls are never deleted; a session that
  // retention removes (issue 41) is counted out. The functions keep the schema they were made in
  // (search_path FROM CURRENT), so a delete run under another search_path still finds the totals.
  // The tables are locked while the sums are taken, so no row is counted twice or missed.
  `
  LOCK TABLE sessions, model_usage IN SHARE MODE;
  CREATE TABLE store_totals (
    shard INT PRIMARY KEY,
    sessions BIGINT NOT NULL,
    calls BIGINT NOT NULL,
    prompt BIGINT NOT NULL,
    completion BIGINT NOT NULL,
    estimated BIGINT NOT NULL
  );
  INSERT INTO store_totals SELECT g, 0, 0, 0, 0, 0 FROM generate_series(0, 15) AS g;
  UPDATE store_totals SET sessions = (SELECT COUNT(*) FROM sessions),
      calls = u.calls, prompt = u.prompt, completion = u.completion, estimated = u.estimated
    FROM (SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt,
        COALESCE(SUM(completion_tokens), 0) AS completion,
        COUNT(*) FILTER (WHERE estimated) AS estimated FROM model_usage) AS u
    WHERE shard = 0;
  CREATE FUNCTION store_totals_usage() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    UPDATE store_totals SET calls = calls + 1, prompt = prompt + NEW.prompt_tokens,
      completion = completion + NEW.completion_tokens,
      estimated = estimated + CASE WHEN NEW.estimated THEN 1 ELSE 0 END
    WHERE shard = NEW.id % 16;
    RETURN NULL;
  END $$;
  CREATE TRIGGER store_totals_usage AFTER INSERT ON model_usage
    FOR EACH ROW EXECUTE FUNCTION store_totals_usage();
  CREATE FUNCTION store_totals_sessions() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    UPDATE store_totals SET sessions = sessions + 1 WHERE shard = abs(hashtext(NEW.key)) % 16;
    RETURN NULL;
  END $$;
  CREATE TRIGGER store_totals_sessions AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION store_totals_sessions();
  CREATE FUNCTION store_totals_sessions_removed() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    UPDATE store_totals SET sessions = sessions - 1 WHERE shard = abs(hashtext(OLD.key)) % 16;
    RETURN NULL;
  END $$;
  CREATE TRIGGER store_totals_sessions_removed AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION store_totals_sessions_removed();
  CREATE INDEX sessions_resume_pending ON sessions(key) WHERE resume_pending;
  `,
  // 21 (issue 42, the sessions list on an aged store): what the list shows of each transcript (its
  // message count, where its first user message and its last message are, its tokens) is kept as
  // rows are written, one row per transcript, instead of counted and summed over its messages and
  // model calls for each listed session on every read. Statement triggers keep it, one upsert per
  // transcript a statement touched: messages written count in, messages retention deletes count
  // out (the first or last one found again); model calls are never deleted; a transcript
  // retention removes takes its row along. Locked while the sums are taken, as in 20.
  `
  LOCK TABLE messages, model_usage IN SHARE MODE;
  CREATE TABLE transcript_stats (
    session_id TEXT PRIMARY KEY,
    messages BIGINT NOT NULL,
    last_seq BIGINT,
    first_user_seq BIGINT,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL
  );
  INSERT INTO transcript_stats
    SELECT session_id, COUNT(*), MAX(seq), MIN(seq) FILTER (WHERE role = 'user'), 0, 0
    FROM messages GROUP BY session_id;
  INSERT INTO transcript_stats
    SELECT session_id, 0, NULL, NULL, SUM(prompt_tokens), SUM(completion_tokens)
    FROM model_usage GROUP BY session_id
    ON CONFLICT (session_id) DO UPDATE SET prompt_tokens = EXCLUDED.prompt_tokens,
      completion_tokens = EXCLUDED.completion_tokens;
  CREATE FUNCTION transcript_stats_messages() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    INSERT INTO transcript_stats AS t
      SELECT session_id, COUNT(*), MAX(seq), MIN(seq) FILTER (WHERE role = 'user'), 0, 0
      FROM added GROUP BY session_id
      ON CONFLICT (session_id) DO UPDATE SET messages = t.messages + EXCLUDED.messages,
        last_seq = GREATEST(t.last_seq, EXCLUDED.last_seq),
        first_user_seq = LEAST(t.first_user_seq, EXCLUDED.first_user_seq);
    RETURN NULL;
  END $$;
  CREATE TRIGGER transcript_stats_messages AFTER INSERT ON messages
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION transcript_stats_messages();
  CREATE FUNCTION transcript_stats_messages_removed() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    UPDATE transcript_stats AS t SET messages = t.messages - r.n,
        last_seq = (SELECT MAX(seq) FROM messages m WHERE m.session_id = t.session_id),
        first_user_seq = (SELECT MIN(seq) FROM messages m
          WHERE m.session_id = t.session_id AND m.role = 'user')
      FROM (SELECT session_id, COUNT(*) AS n FROM removed GROUP BY session_id) AS r
      WHERE t.session_id = r.session_id;
    RETURN NULL;
  END $$;
  CREATE TRIGGER transcript_stats_messages_removed AFTER DELETE ON messages
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION transcript_stats_messages_removed();
  CREATE FUNCTION transcript_stats_usage() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    INSERT INTO transcript_stats AS t
      SELECT session_id, 0, NULL, NULL, SUM(prompt_tokens), SUM(completion_tokens)
      FROM added GROUP BY session_id
      ON CONFLICT (session_id) DO UPDATE SET prompt_tokens = t.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = t.completion_tokens + EXCLUDED.completion_tokens;
    RETURN NULL;
  END $$;
  CREATE TRIGGER transcript_stats_usage AFTER INSERT ON model_usage
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION transcript_stats_usage();
  `,
];
