/**
 * The page's WebSocket to /ws: reconnects by itself with exponential backoff and jitter,
 * pings to notice a dead connection, and counts as connected only once the server's `hello`
 * arrived (docs/webchat-protocol.md). The browser sends the session cookie (set by the login
 * link) with the upgrade; the page itself never sees a token.
 */

const SUBPROTOCOL = "keel.v1";
const PING_EVERY_MS = 25_000;
const PONG_TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 15_000;

/**
 * `handlers.onFrame(frame)` gets every server frame; `onOnline()` runs after each `hello`,
 * `onOffline()` when the connection is lost, `onLoggedOut()` when a failed connection turns out
 * to lack a valid session (a WebSocket does not show the 401 itself).
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

  function connect() {
    clearTimeout(state.reconnectTimer);
    const previous = state.ws;
    state.ws = null;
    previous?.close();
    let ws;
    try {
      ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`, [
        SUBPROTOCOL,
      ]);
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
      if (ws !== state.ws) return;
      if (!state.connected) checkSession();
      disconnected();
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

  /** A connection refused before its `hello`: a 401 from the control API means the session ended. */
  function checkSession() {
    fetch("/api/status", { cache: "no-store" })
      .then((response) => {
        if (response.status === 401) handlers.onLoggedOut?.();
      })
      .catch(() => {});
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
