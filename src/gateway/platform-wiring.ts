/**
 * Builds the platform adapters the config enables and hooks each into what it needs: the API
 * and the web chat mount routes on the HTTP server and follow the runner's live events;
 * Telegram reports its health changes.
 */
import type { Logger } from "pino";
import type { Config } from "../config/schema.js";
import { isLoopbackPeer, secretsEqual } from "../control/http-auth.js";
import type { HttpServer } from "../control/http-server.js";
import { createWebRoutes } from "../control/web-routes.js";
import { OpenAiApiAdapter } from "../platforms/openai-api/adapter.js";
import type { PlatformAdapter } from "../platforms/platform.js";
import { LazyTelegramAdapter } from "../platforms/telegram/lazy-adapter.js";
import { WebchatAdapter } from "../platforms/webchat/adapter.js";
import { webSocketToken } from "../platforms/webchat/upgrade-auth.js";
import type { Runner } from "../runner/runner.js";
import type { Store } from "../sessions/store.js";

export interface PlatformWiring {
  config: Config;
  logger: Logger;
  store: Store;
  runner: Runner;
  http: HttpServer;
  onPlatformStatusChange(): void;
}

export function createPlatformAdapters(wiring: PlatformWiring): PlatformAdapter[] {
  const { config } = wiring;
  const adapters: PlatformAdapter[] = [];
  if (config.platforms.api.enabled) adapters.push(createApiAdapter(wiring));
  if (config.platforms.webchat.enabled) adapters.push(createWebchatAdapter(wiring));
  const telegram = config.platforms.telegram;
  if (config.telegramEnabled && telegram.token) {
    adapters.push(
      new LazyTelegramAdapter({
        token: telegram.token,
        apiRoot: telegram.api_root,
        allowedUsers: telegram.allowed_users,
        groupSessionsPerUser: telegram.group_sessions_per_user,
        pairing: wiring.store,
        logger: wiring.logger.child({ component: "telegram" }),
        onStatusChange: () => wiring.onPlatformStatusChange(),
      }),
    );
  }
  return adapters;
}

function createApiAdapter({
  config,
  logger,
  store,
  runner,
  http,
}: PlatformWiring): PlatformAdapter {
  const api = new OpenAiApiAdapter({
    apiKey: config.platforms.api.key,
    modelName: config.model.name,
    store,
    subscribe: (listener) => runner.onEvent(listener),
    logger: logger.child({ component: "api" }),
  });
  http.addRoutes(api.routes());
  return api;
}

function createWebchatAdapter({
  config,
  logger,
  store,
  runner,
  http,
}: PlatformWiring): PlatformAdapter {
  const webchat = new WebchatAdapter({
    store,
    logger: logger.child({ component: "webchat" }),
    // Loopback clients need no token; others must present the control token.
    isAllowed: (req) => {
      if (isLoopbackPeer(req)) return true;
      const token = webSocketToken(req);
      return token !== null && secretsEqual(token, config.controlToken);
    },
  });
  runner.onEvent((event) => {
    const { sessionKey, sessionId } = event;
    if (event.type === "turn_end") {
      webchat.publishTurnEvent({
        sessionKey,
        sessionId,
        event: { type: "turn_end", stopReason: event.stopReason },
      });
    } else if (event.type === "turn_start") {
      webchat.publishTurnEvent({ sessionKey, sessionId, event: { type: "turn_start" } });
    } else {
      webchat.publishTurnEvent({ sessionKey, sessionId, event });
    }
  });
  http.addUpgrade("/ws", (req, socket, head) => webchat.handleUpgrade(req, socket, head));
  http.addRoutes(createWebRoutes());
  return webchat;
}
