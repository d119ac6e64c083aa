/**
 * The configuration reference: one zod schema, snake_case keys exactly as in config.yaml.
 * Unknown keys are errors (typos must not pass silently). Defaults live here and nowhere else.
 */
import { isIP } from "node:net";
import { z } from "zod";

export const BUSY_INPUT_MODES = ["interrupt", "queue", "steer"] as const;
export const TOOL_PROGRESS_MODES = ["off", "compact", "verbose"] as const;

const fallbackModel = z.strictObject({
  base_url: z.url().describe("OpenAI-compatible endpoint of the fallback model"),
  name: z.string().min(1).describe("Model name passed to that endpoint"),
  api_key: z.string().optional().describe("API key for that endpoint"),
});

const model = z
  .strictObject({
    base_url: z
      .url()
      .optional()
      .describe("OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1"),
    api_key: z.string().optional().describe("API key sent as Bearer to the model endpoint"),
    name: z.string().min(1).optional().describe("Model name passed to the endpoint"),
    timeout_seconds: z
      .number()
      .positive()
      .default(120)
      .describe("Abort a model call after this long"),
    vision: z
      .boolean()
      .default(true)
      .describe("Send images to the model as images (false: a note with the saved path)"),
    transcription: z
      .strictObject({
        base_url: z
          .url()
          .optional()
          .describe("Endpoint for /audio/transcriptions (default: base_url)"),
        api_key: z.string().optional().describe("API key for it (default: api_key)"),
        name: z.string().min(1).default("whisper-1").describe("Transcription model"),
      })
      .prefault({})
      .describe("Where voice notes and audio are transcribed"),
    context_window: z
      .number()
      .int()
      .min(1024)
      .optional()
      .describe(
        "Tokens the model accepts per request (default: what the endpoint's /v1/models reports, else 32768)",
      ),
    max_retries: z
      .number()
      .int()
      .min(0)
      .max(10)
      .default(3)
      .describe("Retries of a model call after a 429, 5xx, timeout or network error"),
    fallbacks: z
      .array(fallbackModel)
      .default([])
      .describe("Models tried in order once the main one keeps failing"),
    prices: z
      .strictObject({
        input_per_mtok: z.number().min(0).describe("Price of a million prompt tokens"),
        output_per_mtok: z.number().min(0).describe("Price of a million completion tokens"),
      })
      .optional()
      .describe("Prices for the cost estimate of /usage"),
  })
  .prefault({});

const agent = z
  .strictObject({
    max_iterations: z
      .number()
      .int()
      .positive()
      .default(90)
      .describe("Model calls per turn at most"),
    restart_drain_timeout: z
      .number()
      .min(0)
      .default(0)
      .describe("Seconds to let running turns finish on stop/restart"),
    auto_resume_freshness: z
      .number()
      .min(0)
      .default(3600)
      .describe("Seconds an interrupted session stays auto-resumable"),
    cwd: z
      .string()
      .optional()
      .describe("Working folder of the agent's tools (default $KEEL_HOME/workspace)"),
    max_concurrent_turns: z
      .number()
      .int()
      .positive()
      .default(8)
      .describe("Sessions running a turn at once"),
    tool_timeout: z
      .number()
      .positive()
      .default(300)
      .describe("Default seconds before a terminal command is killed"),
    system_prompt: z.string().optional().describe("Extra system prompt text"),
    compaction: z
      .strictObject({
        threshold: z
          .number()
          .gt(0.1)
          .lt(1)
          .default(0.75)
          .describe("Fraction of the context window at which older turns are summarised"),
      })
      .prefault({}),
    env_passthrough: z
      .array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"))
      .default([])
      .describe("Environment variables the tools see besides the basic ones (PATH, HOME, ...)"),
    resume_breaker_boots: z
      .number()
      .int()
      .min(2)
      .default(3)
      .describe("Boots with resumable sessions that trip the restart-loop breaker"),
    resume_breaker_window: z
      .number()
      .min(0)
      .default(60)
      .describe(
        "Seconds in which those boots trip the breaker, and that the gateway must then stay up before it resumes what the breaker held back (0 disables it)",
      ),
  })
  .prefault({});

const display = z
  .strictObject({
    busy_input_mode: z
      .enum(BUSY_INPUT_MODES)
      .default("interrupt")
      .describe("What a message does while its session is busy"),
    streaming: z
      .boolean()
      .default(true)
      .describe("Edit the reply in place as it is written, on chat platforms"),
    tool_progress: z
      .enum(TOOL_PROGRESS_MODES)
      .default("compact")
      .describe(
        "Tool activity shown while the agent works: off, compact (one line per call), verbose (with an output tail)",
      ),
    show_transcripts: z
      .boolean()
      .default(true)
      .describe("Echo a voice note's transcript to the chat"),
  })
  .prefault({});

const http = z
  .strictObject({
    host: z.string().min(1).default("127.0.0.1").describe("Listen address"),
    port: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .default(8642)
      .describe("Listen port (0 picks a free one)"),
    max_body_bytes: z
      .number()
      .int()
      .positive()
      .default(20 * 1_048_576)
      .describe("Largest accepted request body (a /v1 request with a phone photo is several MiB)"),
    trust_loopback: z
      .boolean()
      .default(false)
      .describe("Serve loopback clients without a credential (logs a warning at start)"),
    public_hosts: z
      .array(z.string().min(1).toLowerCase())
      .default([])
      .describe("Host header values accepted besides the loopback names (required off loopback)"),
    headers_timeout: z
      .number()
      .positive()
      .default(10)
      .describe("Seconds a client has to send a request's headers; then the connection is closed"),
    request_timeout: z
      .number()
      .positive()
      .default(60)
      .describe(
        "Seconds a client has to send a whole request (headers and body); answers, streams included, are not limited",
      ),
    max_connections: z
      .number()
      .int()
      .positive()
      .default(512)
      .describe("Open connections at most (WebSockets included); further ones are closed at once"),
    max_buffered_bytes: z
      .number()
      .int()
      .positive()
      .default(8 * 1_048_576)
      .describe("Bytes a /v1 stream may hold for a client that does not read; then it is cut off"),
    session_ttl: z
      .number()
      .int()
      .positive()
      .default(43_200)
      .describe("Seconds a browser login (the keel_session cookie) lasts"),
  })
  .refine((h) => h.headers_timeout <= h.request_timeout, {
    message: "http.headers_timeout must not exceed http.request_timeout",
    path: ["headers_timeout"],
  })
  .prefault({});

const control = z
  .strictObject({
    token: z
      .string()
      .min(16)
      .optional()
      .describe("Bearer token for the control API (generated when unset)"),
  })
  .prefault({});

const metrics = z
  .strictObject({
    token: z
      .string()
      .min(16)
      .optional()
      .describe("Bearer token that may read GET /metrics and nothing else (for a scraper)"),
  })
  .prefault({});

const telemetry = z
  .strictObject({
    otlp_endpoint: z
      .url()
      .optional()
      .describe(
        "OTLP/HTTP collector for traces (e.g. http://127.0.0.1:4318); unset: no tracing SDK loaded",
      ),
  })
  .prefault({});

const telegram = z
  .strictObject({
    enabled: z.boolean().optional().describe("Defaults to true when a token is set"),
    token: z.string().min(1).optional().describe("Bot token from @BotFather"),
    api_root: z.url().default("https://api.telegram.org").describe("Bot API server"),
    allowed_users: z
      .array(z.union([z.string(), z.number()]).transform(String))
      .default([])
      .describe("User ids allowed to talk"),
    admin_users: z
      .array(z.union([z.string(), z.number()]).transform(String))
      .default([])
      .describe("User ids with operator rights (/restart, /sethome); they may also talk"),
    home_channel: z
      .union([z.string(), z.number()])
      .transform(String)
      .optional()
      .describe("Chat id that gets lifecycle greetings"),
    group_sessions_per_user: z
      .boolean()
      .default(false)
      .describe("One session per user inside a group"),
    max_file_mb: z
      .number()
      .positive()
      .default(20)
      .describe("Largest file taken from a chat (the cloud Bot API serves at most 20 MB)"),
  })
  .prefault({});

export const APPROVAL_MODES = ["off", "dangerous", "always"] as const;

/** `tools.sandbox`: `auto` is `workspace` where bubblewrap works, else `off` (with a warning). */
export const SANDBOX_MODES = ["auto", "workspace", "off"] as const;

const regexList = (what: string) =>
  z
    .array(
      z.string().refine(
        (source) => {
          try {
            new RegExp(source);
            return true;
          } catch {
            return false;
          }
        },
        { message: "must be a valid regular expression" },
      ),
    )
    .default([])
    .describe(what);

/** `intranet.example`, `10.1.2.3`, `fd00::1`, `10.0.0.0/8`, `fd00::/8`. */
function isHostOrCidr(entry: string): boolean {
  const [address, prefix, ...rest] = entry.split("/");
  if (rest.length > 0 || !address) return false;
  const family = isIP(address);
  if (prefix !== undefined) {
    if (family === 0 || !/^\d{1,3}$/.test(prefix)) return false;
    return Number(prefix) <= (family === 4 ? 32 : 128);
  }
  return (
    family !== 0 ||
    /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(address)
  );
}

export const WEB_SEARCH_PROVIDERS = ["searxng", "brave", "tavily"] as const;

const webSearch = z
  .strictObject({
    provider: z
      .enum(WEB_SEARCH_PROVIDERS)
      .describe("Search engine behind web_search (none: the tool is not offered)"),
    url: z
      .url()
      .optional()
      .describe("Base URL of the engine (required for searxng; brave and tavily have defaults)"),
    api_key: z
      .string()
      .min(1)
      .optional()
      .describe("API key (brave, tavily); never shown to the model"),
  })
  .refine((search) => search.provider !== "searxng" || search.url !== undefined, {
    message: "searxng needs url (the base URL of your SearXNG instance)",
    path: ["url"],
  })
  .refine((search) => search.provider === "searxng" || search.api_key !== undefined, {
    message: "brave and tavily need api_key",
    path: ["api_key"],
  });

const webTools = z
  .strictObject({
    allow_hosts: z
      .array(
        z.string().refine(isHostOrCidr, {
          message: "must be a host name, an IP address or a CIDR such as 10.1.0.0/16",
        }),
      )
      .default([])
      .describe(
        "Host names, addresses or CIDRs web tools may reach although private (e.g. an intranet wiki)",
      ),
    max_bytes: z
      .number()
      .int()
      .positive()
      .default(5 * 1024 * 1024)
      .describe("Bytes web_fetch reads of one response at most"),
    search: webSearch.optional().describe("The web_search provider"),
    browser: z.boolean().default(false).describe("Offer the browser tool (system Chromium)"),
    browser_executable: z
      .string()
      .min(1)
      .default("/usr/bin/chromium")
      .describe("The Chromium (or Chrome) program the browser tool runs"),
  })
  .prefault({});

const tools = z
  .strictObject({
    approval: z
      .enum(APPROVAL_MODES)
      .default("dangerous")
      .describe("Which tool calls wait for a human: none, dangerous commands, or every call"),
    dangerous_patterns: regexList(
      "Regular expressions: shell commands matching one also wait for approval",
    ),
    allow_patterns: regexList(
      "Regular expressions: shell commands matching one never wait (wins over every rule)",
    ),
    approval_timeout: z
      .number()
      .positive()
      .default(600)
      .describe("Seconds a tool call waits for approval before it is denied"),
    sandbox: z
      .enum(SANDBOX_MODES)
      .default("auto")
      .describe(
        "Where terminal commands run: in a bubblewrap sandbox (workspace), unconfined (off), or the sandbox where bubblewrap works (auto)",
      ),
    sandbox_writable: z
      .array(z.string().min(1))
      .default([])
      .describe("Paths the sandbox leaves writable besides the working folder"),
    sandbox_network: z
      .boolean()
      .default(true)
      .describe("Sandboxed commands may use the network (false: loopback of their own only)"),
    web: webTools,
  })
  .prefault({});

const mcpServer = z.union([
  z.strictObject({
    command: z.string().min(1).describe("Program of a stdio MCP server"),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    approval: z.enum(APPROVAL_MODES).default("dangerous"),
  }),
  z.strictObject({
    url: z.url().describe("Streamable HTTP endpoint of an MCP server"),
    headers: z.record(z.string(), z.string()).default({}),
    approval: z.enum(APPROVAL_MODES).default("dangerous"),
  }),
]);

const mcp = z
  .strictObject({
    servers: z
      .record(
        z.string().regex(/^[A-Za-z][A-Za-z0-9_-]{0,29}$/, "a letter, then letters, digits, _ or -"),
        mcpServer,
      )
      .default({})
      .describe("MCP servers whose tools the agent may call, as <name>__<tool>"),
  })
  .prefault({});

/**
 * A Discord id (snowflake). Ids have ~19 digits, more than a YAML number keeps exactly, so an
 * unquoted large id is an error instead of a silently different id.
 */
const snowflake = z.union([
  z.string().regex(/^\d{1,20}$/, "must be a Discord id (digits only)"),
  z
    .number()
    .refine(
      Number.isSafeInteger,
      "write Discord ids in quotes: this number is too large to keep exactly",
    )
    .transform(String),
]);
const snowflakes = z.array(snowflake).default([]);

const discord = z
  .strictObject({
    token: z.string().min(1).optional().describe("Bot token from the Discord Developer Portal"),
    api_root: z
      .url()
      .default("https://discord.com/api")
      .describe("REST base; the gateway URL comes from GET <api_root>/v10/gateway/bot"),
    allowed_users: snowflakes.describe("User ids allowed to talk"),
    admin_users: snowflakes.describe(
      "User ids with operator rights (/restart, /sethome); they may also talk",
    ),
    free_channels: snowflakes.describe(
      "Guild channel (or thread) ids where the bot answers without being mentioned",
    ),
    home_channel: snowflake.optional().describe("Channel id that gets lifecycle greetings"),
  })
  .prefault({});

const slackIdList = z.array(z.string().min(1)).default([]);

const slack = z
  .strictObject({
    app_token: z
      .string()
      .min(1)
      .optional()
      .describe("App-level token (xapp-...) with connections:write, for Socket Mode"),
    bot_token: z.string().min(1).optional().describe("Bot token (xoxb-...) for the Web API"),
    api_root: z.url().default("https://slack.com/api/").describe("Slack Web API base URL"),
    allowed_users: slackIdList.describe("Slack user ids (U...) allowed to talk"),
    admin_users: slackIdList.describe(
      "Slack user ids with operator rights (/restart, /sethome); they may also talk",
    ),
    home_channel: z.string().min(1).optional().describe("Channel id that gets lifecycle greetings"),
  })
  .prefault({});

/** WhatsApp user ids are phone numbers in international form, digits only (`wa_id`). */
const waIdList = z
  .array(z.string().regex(/^\d{6,20}$/, "a WhatsApp id is the phone number's digits"))
  .default([]);

const whatsapp = z
  .strictObject({
    phone_number_id: z
      .string()
      .regex(/^\d+$/)
      .optional()
      .describe("The Cloud API phone number id (digits, from the app's WhatsApp > API Setup page)"),
    access_token: z.string().min(1).optional().describe("A system user's permanent access token"),
    app_secret: z
      .string()
      .min(1)
      .optional()
      .describe("The Meta app's secret: webhooks are verified with it (X-Hub-Signature-256)"),
    verify_token: z
      .string()
      .min(1)
      .optional()
      .describe("The token the webhook's GET handshake must echo (chosen by you, set in the app)"),
    api_root: z.url().default("https://graph.facebook.com/").describe("Graph API base URL"),
    allowed_users: waIdList.describe("WhatsApp ids (phone digits) allowed to talk"),
    admin_users: waIdList.describe(
      "WhatsApp ids with operator rights (/restart, /sethome); they may also talk",
    ),
  })
  .prefault({});

/** Matrix user ids: `@name:server`. */
const matrixIdList = z
  .array(z.string().regex(/^@[^:\s]+:\S+$/, "a Matrix user id looks like @name:server"))
  .default([]);

const matrix = z
  .strictObject({
    homeserver: z.url().optional().describe("The homeserver's client-server API base URL"),
    user_id: z
      .string()
      .regex(/^@[^:\s]+:\S+$/)
      .optional()
      .describe("The bot account's user id (@keel:example.org)"),
    access_token: z.string().min(1).optional().describe("The bot account's access token"),
    allowed_users: matrixIdList.describe("Matrix user ids allowed to talk (and to invite the bot)"),
    admin_users: matrixIdList.describe(
      "Matrix user ids with operator rights (/restart, /sethome); they may also talk",
    ),
  })
  .prefault({});

/** Email addresses (lowercased when compared). */
const emailList = z.array(z.email("an email address looks like name@example.org")).default([]);

/** What every mail server setting has; IMAP needs a login, SMTP may go without one. */
const mailServer = (what: "IMAP" | "SMTP", tlsPort: number) => ({
  host: z.string().min(1).describe(`The ${what} server's host name`),
  port: z.number().int().min(1).max(65535).describe(`The ${what} server's port`),
  tls: z
    .boolean()
    .optional()
    .describe(
      `TLS from the first byte; false: STARTTLS, required unless the host is loopback. Default: true on port ${tlsPort}`,
    ),
});

const email = z
  .strictObject({
    imap: z
      .strictObject({
        ...mailServer("IMAP", 993),
        user: z.string().min(1).describe("The IMAP login"),
        password: z.string().min(1).describe("The IMAP password (an app password where offered)"),
        folder: z
          .string()
          .min(1)
          .default("Keel")
          .describe("Where a message goes once it is stored (created when missing)"),
      })
      .optional()
      .describe("The mailbox Keel reads (its INBOX, watched with IDLE)"),
    smtp: z
      .strictObject({
        ...mailServer("SMTP", 465),
        user: z.string().min(1).optional().describe("The SMTP login, when the server asks for one"),
        password: z.string().min(1).optional().describe("The SMTP password"),
      })
      .optional()
      .describe("The server Keel sends replies through"),
    address: z.email().optional().describe("Keel's own address (From: of every reply)"),
    allowed_senders: emailList.describe("Addresses allowed to write to Keel"),
    admin_senders: emailList.describe(
      "Addresses with operator rights (/restart, /sethome); they may also write",
    ),
  })
  .prefault({});

const store = z
  .strictObject({
    url: z
      .string()
      .min(1)
      .optional()
      .describe(
        "postgres://user:pass@host:5432/db keeps the store in Postgres (several gateways may share it); unset: SQLite state.db in the home",
      ),
  })
  .prefault({});

const cluster = z
  .strictObject({
    lease_ttl: z
      .number()
      .positive()
      .default(15)
      .describe(
        "Seconds a gateway's session lease (and heartbeat) lasts without renewal, on a shared Postgres store",
      ),
    instance_id: z
      .string()
      .min(1)
      .optional()
      .describe(
        "This gateway's id among those sharing the store (default: host, pid and a random part)",
      ),
  })
  .prefault({});

const alerts = z
  .strictObject({
    webhook: z
      .url()
      .optional()
      .describe(
        'URL that gets each alert as POST JSON {alert, state: "raised"|"cleared", detail, at}',
      ),
    chat: z
      .string()
      .regex(/^[a-z]+:[^:]+(:[^:]+)?$/, 'must be "platform:chat", e.g. telegram:12345')
      .optional()
      .describe("Chat (platform:chat) that gets each alert, through the outbox"),
    after: z
      .number()
      .positive()
      .default(300)
      .describe("Seconds a condition must hold before its alert is raised"),
    heartbeat_url: z
      .url()
      .optional()
      .describe("URL fetched (GET) while no alert is raised: a dead-man's switch for a monitor"),
    heartbeat_every: z
      .number()
      .positive()
      .default(60)
      .describe("Seconds between two fetches of alerts.heartbeat_url"),
  })
  .prefault({});

export const ConfigSchema = z.strictObject({
  model,
  agent,
  display,
  http,
  control,
  metrics,
  telemetry,
  tools,
  mcp,
  platforms: z
    .strictObject({
      api: z
        .strictObject({
          enabled: z.boolean().default(true),
          key: z
            .string()
            .min(1)
            .optional()
            .describe("Bearer key for /v1 besides the control token (no operator rights)"),
        })
        .prefault({}),
      webchat: z.strictObject({ enabled: z.boolean().default(true) }).prefault({}),
      telegram,
      discord,
      slack,
      whatsapp,
      matrix,
      email,
    })
    .prefault({}),
  store,
  cluster,
  alerts,
  logging: z
    .strictObject({
      level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    })
    .prefault({}),
});

export type McpServerConfig = z.output<typeof mcpServer>;

export type ConfigInput = z.input<typeof ConfigSchema>;
export type ParsedConfig = z.output<typeof ConfigSchema>;

/** The resolved configuration the gateway runs with. */
export interface Config extends ParsedConfig {
  /** The Keel home folder (absolute). */
  home: string;
  /** Resolved `agent.cwd`. */
  cwd: string;
  /** The control token in effect (configured or generated into `control_token`). */
  controlToken: string;
  /** Telegram is on (explicitly, or because a token is set). */
  telegramEnabled: boolean;
  /** The environment the agent's tools run with (see tool-env.ts): scrubbed of Keel's secrets. */
  toolEnv: Readonly<Record<string, string>>;
  /** KEEL_BWRAP: the bubblewrap program the sandbox runs (default `bwrap`, found on PATH). */
  bwrapProgram: string;
  /** KEEL_CRASH_POINT: a named crash point for the crash-safety harness (never set in production). */
  crashPoint: string | undefined;
}
