/**
 * Versioned schema migrations for the SQLite store. Each entry runs once, in order, inside a
 * transaction; `PRAGMA user_version` records how far a database has come. Never edit a shipped
 * migration: add a new one.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE sessions (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    platform TEXT,
    origin TEXT,
    resume_pending INTEGER NOT NULL DEFAULT 0,
    resume_reason TEXT,
    resume_marked_at INTEGER,
    interrupt_count INTEGER NOT NULL DEFAULT 0,
    suspended INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX sessions_updated ON sessions(updated_at);

  -- Every transcript ever started, so a transcript left behind by /new stays readable.
  CREATE TABLE transcripts (
    session_id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT,
    created_at INTEGER NOT NULL
  );

  CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_id INTEGER,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX messages_session ON messages(session_id, seq);

  CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    received_at INTEGER NOT NULL,
    UNIQUE (platform, chat_id, platform_message_id)
  );
  CREATE INDEX inbox_open ON inbox(state) WHERE state IN ('pending', 'running');

  CREATE TABLE turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    inbox_id INTEGER,
    state TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER
  );
  CREATE INDEX turns_running ON turns(state) WHERE state = 'running';

  -- The tool-call journal: a row exists before the tool runs; result is set after.
  CREATE TABLE tool_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tool_call_id TEXT NOT NULL,
    turn_id INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    UNIQUE (turn_id, tool_call_id)
  );
  CREATE INDEX tool_calls_open ON tool_calls(session_id) WHERE state = 'started';

  CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id INTEGER,
    platform TEXT NOT NULL,
    address TEXT NOT NULL,
    text TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    delivered_at INTEGER
  );
  CREATE INDEX outbox_pending ON outbox(platform) WHERE state = 'pending';

  CREATE TABLE pairing (
    code TEXT PRIMARY KEY,
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT,
    chat_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    approved_at INTEGER
  );
  CREATE INDEX pairing_user ON pairing(platform, user_id);

  CREATE TABLE channel_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX channel_events_channel ON channel_events(channel, seq);
  `,
  // 2 (sec-http, operator rights): whether the sender of an inbox message may use gateway-wide
  // commands (/restart, /sethome); commands run from the stored item, also after a restart.
  `
  ALTER TABLE inbox ADD COLUMN operator INTEGER NOT NULL DEFAULT 0;
  `,
  // 3 (sec-api): idempotency keys of the OpenAI-compatible API (Idempotency-Key header), and what a repeated
  // request needs to find the first one's reply: the turn that answered an inbox item, the reply
  // row of a turn, and the notice that answered an item without a turn.
  `
  CREATE TABLE idempotency_keys (
    scope TEXT NOT NULL,           -- a hash of the credential that sent the key, never the secret
    idempotency_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,    -- canonical hash of the request the key was first used for
    inbox_id INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (scope, idempotency_key)
  );
  CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);

  ALTER TABLE outbox ADD COLUMN inbox_id INTEGER;
  CREATE INDEX outbox_inbox ON outbox(inbox_id) WHERE inbox_id IS NOT NULL;
  CREATE INDEX outbox_turn ON outbox(turn_id) WHERE turn_id IS NOT NULL;
  CREATE INDEX turns_inbox ON turns(inbox_id) WHERE inbox_id IS NOT NULL;
  `,
  // 4: scheduled jobs (src/schedules). Each fire is an inbox row (platform `schedule`, chat = job
  // name, message id = the slot's ISO time) committed together with the job's advanced next_fire_at.
  `
  CREATE TABLE schedule_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    expr TEXT NOT NULL,
    tz TEXT,
    prompt TEXT NOT NULL,
    session_key TEXT NOT NULL,
    chat TEXT,
    misfire TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    paused_reason TEXT,
    next_fire_at INTEGER,
    last_fire_at INTEGER,
    last_fired_late_ms INTEGER,
    failures INTEGER NOT NULL DEFAULT 0,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX schedule_jobs_due ON schedule_jobs(next_fire_at) WHERE paused = 0;
  `,
  // 5: the notice given about a session's unanswered request since its last answered turn
  // ('held_back' or 'dropped'), so that a crash cannot make the gateway give it twice.
  `ALTER TABLE sessions ADD COLUMN request_notice TEXT;`,
  // 6 (progress): chat messages that show a turn's reply while it streams, one row per piece
  // (a reply past the platform's length limit continues in the next piece). The final reply is
  // edited into them (state 'final'); a turn cut off leaves them 'open' until they are edited
  // to say so ('interrupted'). `text` is what the message shows, written before each edit.
  `
  CREATE TABLE stream_messages (
    turn_id INTEGER NOT NULL,
    piece INTEGER NOT NULL,
    platform TEXT NOT NULL,
    address TEXT NOT NULL,
    message_id TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'open',
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (turn_id, piece)
  );
  CREATE INDEX stream_messages_open ON stream_messages(platform, state) WHERE state = 'open';
  CREATE INDEX stream_messages_updated ON stream_messages(updated_at);
  `,
  // 7 (discord): durable state of platform adapters, one JSON value per key (the Discord gateway
  // session id, resume URL and last committed sequence; the identify count).
  `
  CREATE TABLE platform_state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
  );
  CREATE INDEX inbox_platform_received ON inbox(platform, received_at);
  `,
  // 8 (approvals, src/approvals): A tool call that waits for a human is a tool_calls row in state
  // 'awaiting_approval' plus an approvals row (who asked, where, until when); the decision moves
  // both in one transaction. approval_grants hold "approve this rule for this session".
  `
  CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    turn_id INTEGER NOT NULL,
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
    created_at INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    decided_at INTEGER
  );
  CREATE INDEX approvals_call ON approvals(session_id, tool_call_id);
  CREATE INDEX approvals_pending ON approvals(deadline_at) WHERE state = 'pending';
  CREATE TABLE approval_grants (
    session_id TEXT NOT NULL,
    rule TEXT NOT NULL,
    granted_by TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, rule)
  );
  ALTER TABLE outbox ADD COLUMN approval_id TEXT;
  `,
  // 9 (context): compactions (a summary that stands in for a transcript's messages up to
  // through_seq in what is sent to the model; the messages themselves stay), tokens used per
  // model call, the model a session chose with /model, and whose memory file its turns use.
  `
  CREATE TABLE compactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_id INTEGER,
    through_seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX compactions_session ON compactions(session_id, id);

  CREATE TABLE model_usage (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_id INTEGER,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,          -- 'turn' or 'compaction'
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL,     -- 1 when the endpoint reported no usage
    created_at INTEGER NOT NULL
  );
  CREATE INDEX model_usage_session ON model_usage(session_id, id);

  ALTER TABLE sessions ADD COLUMN model TEXT;
  ALTER TABLE sessions ADD COLUMN memory_user TEXT;
  `,
  // 10 (media): the files a message came with (platform references, stored with the message);
  // each expensive step on them (download, transcription) recorded once per inbox item; files
  // the agent sent, and the outbox row that sends one; notices given once per transcript.
  `
  ALTER TABLE inbox ADD COLUMN attachments TEXT;
  CREATE TABLE media_steps (
    inbox_id INTEGER NOT NULL,
    step TEXT NOT NULL,            -- e.g. 'download:0', 'transcript:0'
    result TEXT NOT NULL,          -- JSON
    created_at INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, step)
  );
  CREATE TABLE sent_files (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    mime TEXT NOT NULL,
    size INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  );
  ALTER TABLE outbox ADD COLUMN file_id TEXT;
  CREATE TABLE session_notices (
    session_id TEXT NOT NULL,      -- the transcript: a fresh one (/new) may be told again
    notice TEXT NOT NULL,          -- e.g. 'no_vision'
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, notice)
  );
  `,
  // 11 (issue 20, several gateways): the gateways sharing this store, and one lease per session
  // whose fence (a counter that only grows, the row is never deleted) every write of a turn
  // checks, so an instance that lost its lease while paused cannot write over its successor.
  `
  CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
  );
  CREATE TABLE session_leases (
    session_key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    fence INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  );
  CREATE INDEX session_leases_owner ON session_leases(owner);
  `,
  // 12 (issue 20): which gateway accepted each inbox row, so that when it dies before running
  // them the others know which pending messages nobody will run (adoptPendingInbox); which
  // gateway queued each outbox row, which sends it while it lives (its turn's streamed preview
  // is in its hands).
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
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, asker, grant_unit)
  );
  `,
  // 14 (issue 33): the credential a session was created under (a kind, or a hash of the API key;
  // never the secret), so another credential cannot continue or read it. Null: a chat platform's
  // session, or one older than this column (then only operators may continue it over /v1).
  `ALTER TABLE sessions ADD COLUMN credential TEXT;`,
  // 15 (issue 34, a backlog is one turn): the turn that took an inbox row together with others,
  // so that the turn's end closes them all and an answer is found from any of them.
  `
  ALTER TABLE inbox ADD COLUMN turn_id INTEGER;
  CREATE INDEX inbox_turn ON inbox(turn_id) WHERE turn_id IS NOT NULL;
  `,
  // 16 (issue 43): the platforms each gateway delivers to (a JSON array; NULL: not said, taken
  // as all), so a row queued by a live gateway that cannot send it is sent by one that can.
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
    id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    background INTEGER NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    noted INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER
  );
  CREATE UNIQUE INDEX tasks_call ON tasks(parent_session_id, parent_tool_call_id)
    WHERE parent_tool_call_id IS NOT NULL;
  CREATE INDEX tasks_chat ON tasks(chat_platform, chat_id, state);
  CREATE INDEX tasks_root ON tasks(root_session_id);
  CREATE INDEX tasks_parent ON tasks(parent_session_key) WHERE noted = 0;
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
    turn_id INTEGER,
    budget_id TEXT NOT NULL,
    scope_key TEXT,
    period_start INTEGER NOT NULL,
    period_end INTEGER NOT NULL,
    summary TEXT NOT NULL,
    address TEXT,
    requester TEXT,
    state TEXT NOT NULL,
    decided_by TEXT,
    decided_at INTEGER,
    applied INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX budget_pauses_state ON budget_pauses(state, period_end);
  CREATE INDEX budget_pauses_session ON budget_pauses(session_id);
  `,
  // 20 (issue 42, the same speed after a year): what the status and the session list count is
  // kept as it is written, instead of counted over every row on each read (both grew with age:
  // /api/status scanned every session, /api/sessions every model call). Triggers keep the sums;
  // model calls are never deleted; a session retention removes (issue 41) is counted out. Resume-pending sessions and pending inbox rows
  // (the metrics' backlog) get partial indexes of their own.
  `
  CREATE TABLE store_totals (
    shard INTEGER PRIMARY KEY,
    sessions INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    prompt INTEGER NOT NULL,
    completion INTEGER NOT NULL,
    estimated INTEGER NOT NULL
  );
  INSERT INTO store_totals
    SELECT 0, (SELECT COUNT(*) FROM sessions), COUNT(*), COALESCE(SUM(prompt_tokens), 0),
      COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(estimated), 0)
    FROM model_usage;
  CREATE TRIGGER store_totals_usage AFTER INSERT ON model_usage BEGIN
    UPDATE store_totals SET calls = calls + 1, prompt = prompt + NEW.prompt_tokens,
      completion = completion + NEW.completion_tokens, estimated = estimated + NEW.estimated
    WHERE shard = 0;
  END;
  CREATE TRIGGER store_totals_sessions AFTER INSERT ON sessions BEGIN
    UPDATE store_totals SET sessions = sessions + 1 WHERE shard = 0;
  END;
  CREATE TRIGGER store_totals_sessions_removed AFTER DELETE ON sessions BEGIN
    UPDATE store_totals SET sessions = sessions - 1 WHERE shard = 0;
  END;
  CREATE INDEX sessions_resume_pending ON sessions(key) WHERE resume_pending = 1;
  CREATE INDEX inbox_pending ON inbox(platform) WHERE state = 'pending';
  `,
  // 21 (issue 42, the sessions list on an aged store): what the list shows of each transcript (its
  // message count, where its first user message and its last message are, its tokens) is kept as
  // rows are written, one row per transcript, instead of counted and summed over its messages and
  // model calls for each listed session on every read. Triggers keep it: a message written counts
  // in, a message retention deletes counts out (the first or last one found again); model calls
  // are never deleted; a transcript retention removes takes its row along. A store that has
  // transcripts starts from their sums.
  `
  CREATE TABLE transcript_stats (
    session_id TEXT PRIMARY KEY,
    messages INTEGER NOT NULL,
    last_seq INTEGER,
    first_user_seq INTEGER,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL
  ) WITHOUT ROWID;
  INSERT INTO transcript_stats
    SELECT session_id, COUNT(*), MAX(seq), MIN(CASE WHEN role = 'user' THEN seq END), 0, 0
    FROM messages GROUP BY session_id;
  INSERT INTO transcript_stats
    SELECT session_id, 0, NULL, NULL, SUM(prompt_tokens), SUM(completion_tokens)
    FROM model_usage WHERE true GROUP BY session_id
    ON CONFLICT (session_id) DO UPDATE SET prompt_tokens = excluded.prompt_tokens,
      completion_tokens = excluded.completion_tokens;
  CREATE TRIGGER transcript_stats_messages AFTER INSERT ON messages BEGIN
    INSERT INTO transcript_stats VALUES (NEW.session_id, 1, NEW.seq,
        CASE WHEN NEW.role = 'user' THEN NEW.seq END, 0, 0)
      ON CONFLICT (session_id) DO UPDATE SET messages = messages + 1,
        last_seq = MAX(COALESCE(last_seq, 0), NEW.seq),
        first_user_seq = CASE WHEN NEW.role = 'user' AND (first_user_seq IS NULL OR NEW.seq < first_user_seq)
          THEN NEW.seq ELSE first_user_seq END;
  END;
  CREATE TRIGGER transcript_stats_messages_removed AFTER DELETE ON messages BEGIN
    UPDATE transcript_stats SET messages = messages - 1,
      last_seq = CASE WHEN last_seq = OLD.seq
        THEN (SELECT MAX(seq) FROM messages WHERE session_id = OLD.session_id) ELSE last_seq END,
      first_user_seq = CASE WHEN first_user_seq = OLD.seq
        THEN (SELECT MIN(seq) FROM messages WHERE session_id = OLD.session_id AND role = 'user')
        ELSE first_user_seq END
    WHERE session_id = OLD.session_id;
  END;
  CREATE TRIGGER transcript_stats_usage AFTER INSERT ON model_usage BEGIN
    INSERT INTO transcript_stats VALUES (NEW.session_id, 0, NULL, NULL, NEW.prompt_tokens,
        NEW.completion_tokens)
      ON CONFLICT (session_id) DO UPDATE SET prompt_tokens = prompt_tokens + NEW.prompt_tokens,
        completion_tokens = completion_tokens + NEW.completion_tokens;
  END;
  `,
];
