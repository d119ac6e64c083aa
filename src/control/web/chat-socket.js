/**
 * The page's WebSocket to /ws: reconnects by itself with exponential backoff and jitter,
 * pings to notice a dead connection, and counts as connected only once the server's `hello`
 * arrived (docs/webchat-protocol.md).
 */

const SUBPROTOCOL = "keel.v1";
const TOKEN_KEY = "keel.controlToken";
const PING_EVERY_MS = 25_000;
const PONG_TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 15_000;
const SUBPROTOCOL_TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * `handlers.onFrame(frame)` gets every server frame; `onOnline()` runs after each `hello`,
 * `onOffline()` when the connection is lost.
 */
export function createChatSocket(handlers) {
  const state = {
    ws: null,
    connected: false,
    attempt: 0,
    reconnectTimer: null,
    pingTimer: null,
    pongTimer: null,
  };

  function protocols() {
    const list = [SUBPROTOCOL];
    // A browser WebSocket cannot send Authorization: the token rides as a subprotocol.
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token && SUBPROTOCOL_TOKEN.test(token)) list.push(`keel.token.${token}`);
    return list;
  }

  function connect() {
    clearTimeout(state.reconnectTimer);
    const previous = state.ws;
    state.ws = null;
    previous?.close();
    let ws;
    try {
      ws = new WebSocket(
        `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`,
        protocols(),
      );
    } catch {
      disconnected();
      return;
    }
    state.ws = ws;
    ws.onmessage = (message) => {
      if (ws !== state.ws) return;
      clearTimeout(state.pongTimer);
      const frame = JSON.parse(message.data);
      if (frame.type === "hello") online();
      handlers.onFrame(frame);
    };
    ws.onclose = () => {
      if (ws === state.ws) disconnected();
    };
  }

  function online() {
    state.connected = true;
    state.attempt = 0;
    clearInterval(state.pingTimer);
    state.pingTimer = setInterval(() => {
      send({ type: "ping" });
      clearTimeout(state.pongTimer);
      state.pongTimer = setTimeout(dropConnection, PONG_TIMEOUT_MS);
    }, PING_EVERY_MS);
    handlers.onOnline();
  }

  function disconnected() {
    state.ws = null;
    state.connected = false;
    clearInterval(state.pingTimer);
    clearTimeout(state.pongTimer);
    handlers.onOffline();
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** state.attempt) * (0.5 + Math.random() / 2);
    state.attempt += 1;
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = setTimeout(connect, delay);
  }

  /** Drops a connection that stopped answering (a half-open socket may not close for minutes). */
  function dropConnection() {
    const ws = state.ws;
    state.ws = null;
    ws?.close();
    disconnected();
  }

  /** Sends a frame when connected; otherwise drops it (callers resend after `onOnline`). */
  function send(frame) {
    if (state.connected && state.ws) state.ws.send(JSON.stringify(frame));
  }

  window.addEventListener("online", () => {
    if (!state.connected) connect();
  });

  return { connect, send, isConnected: () => state.connected };
}
