/** The `platforms` section of the configuration: one entry per chat platform (schema.ts). */
import { z } from "zod";

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

export const platforms = z
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
  .prefault({});
