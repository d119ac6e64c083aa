/**
 * The alerts of one gateway, as `alerts.*` configures them: nothing runs when neither a webhook,
 * a chat nor a heartbeat URL is set.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import type { ChatAddress } from "../contract/platform.js";
import {
  alertText,
  chatFor,
  fetchHeartbeat,
  parseAlertChat,
  type WebhookRetry,
  WebhookSender,
} from "./alert-delivery.js";
import { AlertMonitor } from "./alert-monitor.js";
import { type GatewaySignals, observeGateway } from "./gateway-conditions.js";

export interface GatewayAlertsOptions {
  config: Pick<Config, "alerts">;
  signals: GatewaySignals;
  /** Queues a notice through the outbox. */
  sendNotice(address: ChatAddress, text: string): Promise<void>;
  /** The home channels: where an alert about `alerts.chat`'s own platform goes instead. */
  homeChannels(): Promise<ChatAddress[]>;
  logger: Logger;
  now: () => number;
  /** How often conditions are looked at (default 10 s, or `after` when shorter). */
  checkEveryMs?: number;
  webhookRetry?: WebhookRetry;
}

export interface GatewayAlerts {
  monitor: AlertMonitor;
  start(): void;
  stop(): Promise<void>;
}

export function createGatewayAlerts(options: GatewayAlertsOptions): GatewayAlerts | null {
  const { alerts } = options.config;
  if (!alerts.webhook && !alerts.chat && !alerts.heartbeat_url) return null;
  const logger = options.logger.child({ component: "alerts" });
  const webhook = alerts.webhook
    ? new WebhookSender(alerts.webhook, logger, options.webhookRetry)
    : null;
  const chat = alerts.chat ? parseAlertChat(alerts.chat) : null;
  const afterMs = alerts.after * 1000;
  const heartbeatUrl = alerts.heartbeat_url;
  const monitor = new AlertMonitor({
    observe: () => observeGateway(options.signals),
    notify: (event) => {
      webhook?.send(event);
      if (chat) {
        options
          .homeChannels()
          .then((homes) => options.sendNotice(chatFor(event.alert, chat, homes), alertText(event)))
          .catch((err: unknown) => logger.error({ err, alert: event.alert }, "alert not queued"));
      }
    },
    afterMs,
    ...(heartbeatUrl && {
      heartbeat: {
        everyMs: alerts.heartbeat_every * 1000,
        beat: () => void fetchHeartbeat(heartbeatUrl, logger, 10_000),
      },
    }),
    checkEveryMs: options.checkEveryMs ?? Math.min(10_000, afterMs, alerts.heartbeat_every * 1000),
    now: options.now,
    logger,
  });
  return {
    monitor,
    start: () => monitor.start(),
    stop: async () => {
      await monitor.stop();
      await webhook?.stop();
    },
  };
}
