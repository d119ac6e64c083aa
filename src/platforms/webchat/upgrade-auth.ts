import type { IncomingMessage } from "node:http";
import { originNamesHost } from "../../control/http-auth.js";

/** Prefix of the optional subprotocol carrying the control token (browsers cannot set headers). */
export const TOKEN_SUBPROTOCOL_PREFIX = "keel.token.";

/**
 * The control token a page offered as a `keel.token.<token>` subprotocol, or null. For the
 * caller's `authorize`, since a browser WebSocket cannot send an Authorization header.
 */
export function webSocketToken(req: IncomingMessage): string | null {
  const header = req.headers["sec-websocket-protocol"];
  if (typeof header !== "string") return null;
  for (const part of header.split(",")) {
    const protocol = part.trim();
    if (protocol.startsWith(TOKEN_SUBPROTOCOL_PREFIX)) {
      return protocol.slice(TOKEN_SUBPROTOCOL_PREFIX.length) || null;
    }
  }
  return null;
}

/** Refuses cross-site pages: an `Origin` header, when present, must name the `Host`. */
export function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  return origin === undefined || originNamesHost(origin, req.headers.host);
}
