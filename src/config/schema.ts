/**
 * The configuration reference: one zod schema, snake_case keys exactly as in config.yaml.
 * Unknown keys are errors (typos must not pass silently). Defaults live here and nowhere else.
 */
import { isIP } from "node:net";
import { z } from "zod";
import { platforms } from "./platforms-schema.js";
import { backup, budgets, limits, retention, tasks } from "./work-schema.js";

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
  platforms,
  store,
  cluster,
  alerts,
  tasks,
  budgets,
  limits,
  retention,
  backup,
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
