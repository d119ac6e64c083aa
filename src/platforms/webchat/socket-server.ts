/**
 * The web chat's WebSocket server, in a module of its own: the adapter imports it when it starts,
 * so ws loads with the web chat and not with every gateway.
 */
import { WebSocketServer } from "ws";

export function createSocketServer(options: {
  maxPayload: number;
  subprotocol: string;
}): WebSocketServer {
  return new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload,
    handleProtocols: (protocols) =>
      protocols.has(options.subprotocol) ? options.subprotocol : false,
  });
}
