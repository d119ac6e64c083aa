/**
 * The configuration reference: one zod schema, snake_case keys exactly as in config.yaml.
 * Unknown keys are errors (typos must not pass silently). Defaults live here and nowhere else.
 */
import { z } from "zod";

export const BUSY_INPUT_MODES = ["interrupt", "queue", "steer"] as const;

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
      .describe("Seconds in which those boots trip the breaker (0 disables it)"),
  })
  .prefault({});

const display = z
  .strictObject({
    busy_input_mode: z
      .enum(BUSY_INPUT_MODES)
      .default("interrupt")
      .describe("What a message does while its session is busy"),
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
      .default(1_048_576)
      .describe("Largest accepted request body"),
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

const telegram = z
  .strictObject({
    enabled: z.boolean().optional().describe("Defaults to true when a token is set"),
    token: z.string().min(1).optional().describe("Bot token from @BotFather"),
    api_root: z.url().default("https://api.telegram.org").describe("Bot API server"),
    allowed_users: z
      .array(z.union([z.string(), z.number()]).transform(String))
      .default([])
      .describe("User ids allowed to talk"),
    home_channel: z
      .union([z.string(), z.number()])
      .transform(String)
      .optional()
      .describe("Chat id that gets lifecycle greetings"),
    group_sessions_per_user: z
      .boolean()
      .default(false)
      .describe("One session per user inside a group"),
  })
  .prefault({});

export const ConfigSchema = z.strictObject({
  model,
  agent,
  display,
  http,
  control,
  platforms: z
    .strictObject({
      api: z
        .strictObject({
          enabled: z.boolean().default(true),
          key: z
            .string()
            .min(1)
            .optional()
            .describe("Bearer key for /v1 (loopback-only when unset)"),
        })
        .prefault({}),
      webchat: z.strictObject({ enabled: z.boolean().default(true) }).prefault({}),
      telegram,
    })
    .prefault({}),
  logging: z
    .strictObject({
      level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
    })
    .prefault({}),
});

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
  /** KEEL_CRASH_POINT: a named crash point for the crash-safety harness (never set in production). */
  crashPoint: string | undefined;
}
