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
];
