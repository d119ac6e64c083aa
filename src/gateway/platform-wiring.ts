/**
 * Builds the platform adapters the config enables and hooks each into what it needs: the API
 * and the web chat mount routes on the HTTP server (the gateway hands them the runner's live
 * events through `onRunnerEvent`), WhatsApp its webhook; every chat platform reports its health changes.
 */
import { join } from "node:path";
import type { Logger } from "pino";
import { connectionLeaseKey, StoreConnectionLease } from "../cluster/connection-lease.js";
import type { Config } from "../config/schema.js";
import type { ConnectionLease, PlatformAdapter } from "../contract/platform.js";
import { requestFacts } from "../control/access-gate.js";
import { createWebRoutes } from "../control/web-routes.js";
import { LazyDiscordAdapter } from "../platforms/discord/lazy-adapter.js";
import { LazyEmailAdapter } from "../platforms/email/lazy-adapter.js";
import { MatrixAdapter } from "../platforms/matrix/adapter.js";
import { OpenAiApiAdapter } from "../platforms/openai-api/adapter.js";
import { LazySlackAdapter } from "../platforms/slack/lazy-adapter.js";
import { LazyTelegramAdapter } from "../platforms/telegram/lazy-adapter.js";
import { type UpgradeVerdict, WebchatAdapter } from "../platforms/webchat/adapter.js";
import { webSocketToken } from "../platforms/webchat/upgrade-auth.js";
import { UPLOADS_PATH, WebchatUploads } from "../platforms/webchat/uploads.js";
import { WhatsappAdapter } from "../platforms/whatsapp/adapter.js";
import type { ClusterMembership } from "./cluster.js";
import type { AdapterWiring } from "./core-wiring.js";

export interface PlatformWiring extends AdapterWiring {
  config: Config;
  logger: Logger;
  /** Set when several gateways share the store: connections one of them holds at a time. */
  cluster?: ClusterMembership | null;
}

export function createPlatformAdapters(wiring: PlatformWiring): PlatformAdapter[] {
  const { platforms } = wiring.config;
  const adapters = [
    platforms.api.enabled ? createApiAdapter(wiring) : null,
    platforms.webchat.enabled ? createWebchatAdapter(wiring) : null,
    telegramAdapter(wiring),
    slackAdapter(wiring),
    discordAdapter(wiring),
    whatsappAdapter(wiring),
    matrixAdapter(wiring),
    emailAdapter(wiring),
  ];
  return adapters.filter((adapter): adapter is PlatformAdapter => adapter !== null);
}

/** Telegram through grammY, loaded on first start; one poller per bot token across gateways. */
function telegramAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const telegram = wiring.config.platforms.telegram;
  if (!(wiring.config.telegramEnabled && telegram.token)) return null;
  return new LazyTelegramAdapter({
    ...chatPlatform(wiring, "telegram"),
    ...usersOf(telegram),
    token: telegram.token,
    apiRoot: telegram.api_root,
    groupSessionsPerUser: telegram.group_sessions_per_user,
    pairing: wiring.store,
    poller: connectionLease(wiring, "telegram", telegram.token),
  });
}

/** Slack in Socket Mode, loaded on first start. */
function slackAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const slack = wiring.config.platforms.slack;
  if (!(slack.app_token || slack.bot_token)) return null;
  return new LazySlackAdapter({
    ...chatPlatform(wiring, "slack"),
    ...usersOf(slack),
    appToken: slack.app_token,
    botToken: slack.bot_token,
    apiRoot: slack.api_root,
  });
}

/** Discord's gateway connection, loaded on first start; one holder per bot token across gateways. */
function discordAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const discord = wiring.config.platforms.discord;
  if (!discord.token) return null;
  return new LazyDiscordAdapter({
    ...chatPlatform(wiring, "discord"),
    ...usersOf(discord),
    token: discord.token,
    apiRoot: discord.api_root,
    freeChannels: discord.free_channels,
    connection: connectionLease(wiring, "discord", discord.token),
  });
}

/** WhatsApp when its Cloud API is configured (its webhook route mounts here). */
function whatsappAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const whatsapp = wiring.config.platforms.whatsapp;
  if (!(whatsapp.phone_number_id || whatsapp.access_token)) return null;
  return createWhatsappAdapter(wiring);
}

/** A Matrix bot account over plain fetch (no SDK: nothing to load lazily); one /sync per account. */
function matrixAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const matrix = wiring.config.platforms.matrix;
  if (!(matrix.homeserver || matrix.access_token)) return null;
  return new MatrixAdapter({
    ...chatPlatform(wiring, "matrix"),
    ...usersOf(matrix),
    homeserver: matrix.homeserver,
    userId: matrix.user_id,
    accessToken: matrix.access_token,
    connection: connectionLease(wiring, "matrix", matrix.access_token),
  });
}

/** A mailbox over IMAP and SMTP, loaded on first start; one IMAP session per mailbox. */
function emailAdapter(wiring: PlatformWiring): PlatformAdapter | null {
  const email = wiring.config.platforms.email;
  if (!(email.imap || email.smtp || email.address)) return null;
  const { imap } = email;
  return new LazyEmailAdapter({
    ...chatPlatform(wiring, "email"),
    imap,
    smtp: email.smtp,
    address: email.address,
    allowedSenders: email.allowed_senders,
    adminSenders: email.admin_senders,
    connection: connectionLease(wiring, "email", imap && `${imap.user}@${imap.host}:${imap.port}`),
  });
}

/**
 * What every chat platform's adapter gets from the wiring: the store, its logger, the health
 * callback, and the progress settings (`display.streaming`, `display.tool_progress`; a platform
 * that cannot edit ignores them).
 */
function chatPlatform(wiring: PlatformWiring, platform: string) {
  return {
    store: wiring.store,
    logger: wiring.logger.child({ component: platform }),
    onStatusChange: () => wiring.onPlatformStatusChange(),
    progress: progressWiring(wiring),
  };
}

/** Who may use a chat platform, from its config section. */
function usersOf(section: { allowed_users: string[]; admin_users: string[] }) {
  return { allowedUsers: section.allowed_users, adminUsers: section.admin_users };
}

/** WhatsApp's messages arrive on its webhook route; no SDK, so nothing to load lazily. */
function createWhatsappAdapter({
  config,
  logger,
  store,
  http,
  onPlatformStatusChange,
}: PlatformWiring) {
  const whatsapp = config.platforms.whatsapp;
  const adapter = new WhatsappAdapter({
    phoneNumberId: whatsapp.phone_number_id,
    accessToken: whatsapp.access_token,
    appSecret: whatsapp.app_secret,
    verifyToken: whatsapp.verify_token,
    apiRoot: whatsapp.api_root,
    allowedUsers: whatsapp.allowed_users,
    adminUsers: whatsapp.admin_users,
    store,
    logger: logger.child({ component: "whatsapp" }),
    onStatusChange: () => onPlatformStatusChange(),
  });
  http.addRoutes(adapter.routes());
  return adapter;
}

/**
 * With several gateways on the store, one at a time holds this platform connection (one poller
 * per bot token, say); none without a cluster or without the credential.
 */
function connectionLease(
  { store, logger, cluster }: PlatformWiring,
  platform: string,
  credential: string | undefined,
): ConnectionLease | undefined {
  if (!(cluster && credential)) return undefined;
  return new StoreConnectionLease({
    store,
    key: connectionLeaseKey(platform, credential),
    owner: cluster.instanceId,
    ttlMs: cluster.leaseTtlMs,
    logger: logger.child({ component: platform }),
  });
}

/** `display.streaming` and `display.tool_progress` apply to every chat platform that edits. */
function progressWiring({ config, store }: PlatformWiring) {
  return {
    settings: {
      streaming: config.display.streaming,
      toolProgress: config.display.tool_progress,
    },
    store,
  };
}

function createApiAdapter({
  config,
  logger,
  store,
  http,
  cluster,
}: PlatformWiring): PlatformAdapter {
  const api = new OpenAiApiAdapter({
    modelName: config.model.name,
    store,
    logger: logger.child({ component: "api" }),
    maxBufferedBytes: config.http.max_buffered_bytes,
    // Another gateway may run a waiting request's turn (it adopted the message): read its answer.
    ...(cluster && { recordPollMs: Math.max(1000, cluster.leaseTtlMs / 3) }),
  });
  http.addRoutes(api.routes());
  return api;
}

function createWebchatAdapter({
  config,
  logger,
  store,
  http,
  access,
}: PlatformWiring): PlatformAdapter {
  // Attached files are held to the same limit as a chat platform's.
  const uploads = new WebchatUploads(
    join(config.home, "uploads"),
    Math.round(config.platforms.telegram.max_file_mb * 1_048_576),
  );
  const webchat = new WebchatAdapter({
    store,
    uploads,
    logger: logger.child({ component: "webchat" }),
    // The session cookie, the control token (header or `keel.token.` subprotocol), or trusted loopback.
    authorize: async (req): Promise<UpgradeVerdict> => {
      const decision = await access.check(requestFacts(req, webSocketToken(req)), "web");
      if (decision.ok) return { ok: true, operator: decision.granted.operator };
      if (decision.status === 429)
        return {
          ok: false,
          status: "429 Too Many Requests",
          retryAfterSeconds: decision.retryAfterSeconds,
        };
      return { ok: false, status: "401 Unauthorized" };
    },
  });
  http.addUpgrade("/ws", (req, socket, head) => webchat.handleUpgrade(req, socket, head));
  http.addRoutes(createWebRoutes());
  http.addRoutesWithOwnBodyLimit(UPLOADS_PATH, uploads.routes());
  return webchat;
}
