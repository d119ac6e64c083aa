/**
 * The config sections that bound the agent's work and the data it leaves: background tasks,
 * spending budgets and per-sender limits, retention and backups.
 */
import { z } from "zod";

export const tasks = z
  .strictObject({
    max_age: z
      .number()
      .int()
      .min(0)
      .default(86_400)
      .describe("Seconds: a task started longer ago is not resumed after downtime (it expires)"),
    max_depth: z
      .number()
      .int()
      .min(1)
      .default(2)
      .describe("How deep delegation may nest (a task's own delegate calls count one deeper)"),
    max_concurrent: z
      .number()
      .int()
      .min(1)
      .default(4)
      .describe("Background tasks running at once per chat; more wait in order"),
    timeout: z.number().positive().default(1800).describe("Seconds a task may run"),
  })
  .prefault({});

export const BUDGET_SCOPES = ["global", "chat", "user", "task", "schedule"] as const;
export const BUDGET_PERIODS = ["day", "month"] as const;

const budget = z
  .strictObject({
    scope: z
      .enum(BUDGET_SCOPES)
      .describe("Whose spend is counted: all, each chat, user, task or schedule"),
    period: z
      .enum(BUDGET_PERIODS)
      .describe("Counted per calendar day or month (gateway's time zone)"),
    tokens: z.number().int().positive().optional().describe("Tokens (in + out) allowed per period"),
    cost: z
      .number()
      .positive()
      .optional()
      .describe("Cost allowed per period, in the currency of model.prices"),
  })
  .refine((b) => b.tokens !== undefined || b.cost !== undefined, {
    message: "a budget needs tokens, cost or both",
  });

const rateLimit = z.strictObject({
  messages: z.number().int().positive().describe("Messages allowed in each window"),
  per: z.number().positive().describe("The window, in seconds"),
});

export const limits = z
  .strictObject({
    per_user: rateLimit.optional().describe("Messages one sender may start per window; more wait"),
    per_chat: rateLimit.optional().describe("Messages one chat may start per window; more wait"),
    exempt_operators: z
      .boolean()
      .default(true)
      .describe("Operators' messages are never held by the limits (false: they are too)"),
  })
  .prefault({});

const days = (what: string) =>
  z.number().positive().optional().describe(`Days ${what} are kept; unset: kept forever`);

/** Data lifecycle (issue 41): how long things are kept; every kind is kept forever by default. */
export const retention = z
  .strictObject({
    transcripts_days: days("conversation messages (and the inbox, outbox and web chat rows)"),
    uploads_days: days("files users sent and files the agent sent"),
    tool_output_days: days("tool results (then replaced by a short 'pruned' marker)"),
    sessions_idle_days: days("a session with no activity"),
  })
  .prefault({});

export const backup = z
  .strictObject({
    every: z
      .number()
      .positive()
      .optional()
      .describe("Seconds between the gateway's own backups; unset: none"),
    keep: z.number().int().positive().default(7).describe("Scheduled backups kept (the newest)"),
    dir: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Folder of `keel backup` without PATH and of scheduled backups (default <home>/backups)",
      ),
  })
  .prefault({});

export const budgets = z
  .array(budget)
  .default([])
  .refine((list) => new Set(list.map((b) => `${b.scope}:${b.period}`)).size === list.length, {
    message: "at most one budget per scope and period",
  })
  .describe("Spending caps: a model call that would start over one waits for an operator");
