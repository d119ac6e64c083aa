/**
 * The web chat page: speaks docs/webchat-protocol.md over /ws. Durable events (user
 * messages, replies, notices) carry a seq and are shown once each; live frames stream the
 * running turn and are replaced by the durable reply. Unacked messages are kept in
 * localStorage and resent with the same client_id after a reconnect or a reload.
 */
import { renderMarkdown } from "./markdown.js";

const SUBPROTOCOL = "keel.v1";
const TOKEN_KEY = "keel.controlToken";
const PENDING_KEY = "keel.chat.pending";
const CURRENT_KEY = "keel.chat.current";
const PING_EVERY_MS = 25_000;
const PONG_TIMEOUT_MS = 10_000;
const RETRY_MS = 3_000;
const MAX_BACKOFF_MS = 15_000;
const SUBPROTOCOL_TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

function randomId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function readJson(storage, key, fallback) {
  try {
    const value = JSON.parse(storage.getItem(key) ?? "null");
    return value ?? fallback;
  } catch {
    return fallback;
  }
}

function clip(text, max) {
  const line = String(text ?? "")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function createChat() {
  const el = {
    sidebar: document.getElementById("sidebar"),
    scrim: document.getElementById("sidebar-scrim"),
    toggle: document.getElementById("toggle-sidebar"),
    list: document.getElementById("conversation-list"),
    newButton: document.getElementById("new-conversation"),
    title: document.getElementById("conversation-title"),
    banner: document.getElementById("offline-banner"),
    messages: document.getElementById("messages"),
    composer: document.getElementById("composer"),
    input: document.getElementById("message-input"),
  };
  const state = {
    ws: null,
    connected: false,
    attempt: 0,
    reconnectTimer: null,
    pingTimer: null,
    pongTimer: null,
    conversations: new Map(),
    current: localStorage.getItem(CURRENT_KEY),
    pending: readJson(localStorage, PENDING_KEY, []),
    /** Streamed turns of the current conversation still waiting for their durable reply. */
    lives: [],
  };

  function conversation(id) {
    let conv = state.conversations.get(id);
    if (!conv) {
      conv = {
        id,
        title: "",
        preview: "",
        updatedAt: Date.now(),
        events: [],
        lastSeq: 0,
        outboxIds: new Set(),
      };
      state.conversations.set(id, conv);
    }
    return conv;
  }

  function savePending() {
    localStorage.setItem(PENDING_KEY, JSON.stringify(state.pending));
  }

  function send(frame) {
    if (state.connected && state.ws) state.ws.send(JSON.stringify(frame));
  }

  // Connection

  function connect() {
    clearTimeout(state.reconnectTimer);
    const previous = state.ws;
    state.ws = null;
    previous?.close();
    const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
    const token = sessionStorage.getItem(TOKEN_KEY);
    const protocols = [SUBPROTOCOL];
    if (token && SUBPROTOCOL_TOKEN.test(token)) protocols.push(`keel.token.${token}`);
    let ws;
    try {
      ws = new WebSocket(url, protocols);
    } catch {
      disconnected();
      return;
    }
    state.ws = ws;
    ws.onmessage = (message) => {
      if (ws !== state.ws) return;
      clearTimeout(state.pongTimer);
      handleFrame(JSON.parse(message.data));
    };
    ws.onclose = () => {
      if (ws === state.ws) disconnected();
    };
  }

  function disconnected() {
    state.ws = null;
    state.connected = false;
    clearInterval(state.pingTimer);
    clearTimeout(state.pongTimer);
    el.banner.hidden = false;
    const delay = Math.min(MAX_BACKOFF_MS, 500 * 2 ** state.attempt) * (0.5 + Math.random() / 2);
    state.attempt += 1;
    clearTimeout(state.reconnectTimer);
    state.reconnectTimer = setTimeout(connect, delay);
  }

  /** Drops a connection that stopped answering (a half-open socket never fires close soon). */
  function dropConnection() {
    const ws = state.ws;
    state.ws = null;
    if (ws) ws.close();
    disconnected();
  }

  function onHello() {
    state.connected = true;
    state.attempt = 0;
    el.banner.hidden = true;
    clearInterval(state.pingTimer);
    state.pingTimer = setInterval(() => {
      send({ type: "ping" });
      clearTimeout(state.pongTimer);
      state.pongTimer = setTimeout(dropConnection, PONG_TIMEOUT_MS);
    }, PING_EVERY_MS);
    send({ type: "list" });
    if (state.current) openCurrent();
    for (const item of state.pending) resend(item);
  }

  function openCurrent() {
    send({
      type: "open",
      conversation_id: state.current,
      after_seq: conversation(state.current).lastSeq,
    });
  }

  function resend(item) {
    item.state = "sending";
    updateBubble(item);
    send({
      type: "send",
      conversation_id: item.conversation_id,
      client_id: item.client_id,
      text: item.text,
    });
  }

  // Frames from the server

  function handleFrame(frame) {
    switch (frame.type) {
      case "hello":
        return onHello();
      case "event":
        return onEvent(frame);
      case "synced":
        return onSynced(frame);
      case "ack":
        return onAck(frame);
      case "error":
        return onError(frame);
      case "conversations":
        return onConversations(frame);
      case "turn_start":
      case "delta":
      case "tool_start":
      case "tool_end":
      case "turn_end":
        if (frame.conversation_id === state.current) onLive(frame);
        return;
      default:
        return;
    }
  }

  function onEvent(event) {
    const conv = conversation(event.conversation_id);
    if (event.seq <= conv.lastSeq) return;
    conv.lastSeq = event.seq;
    // A reply redelivered after a gateway restart carries the same outbox id: show it once.
    if (event.outbox_id != null) {
      if (conv.outboxIds.has(event.outbox_id)) return;
      conv.outboxIds.add(event.outbox_id);
    }
    conv.events.push(event);
    if (event.kind === "user" && !conv.title) conv.title = clip(event.text, 60);
    conv.preview = clip(event.text, 80);
    conv.updatedAt = event.created_at || Date.now();
    if (event.kind === "user" && event.client_id) forgetPending(event.client_id);
    if (event.conversation_id === state.current) showEvent(event);
    renderList();
  }

  function onSynced(frame) {
    // The durable history is authoritative; a running turn comes back as a snapshot.
    if (frame.conversation_id === state.current) dropUnfinishedLives();
  }

  function onAck(frame) {
    const item = forgetPending(frame.client_id);
    if (item) {
      item.state = "sent";
      updateBubble(item);
    }
    if (frame.duplicate) send({ type: "list" });
  }

  function onError(frame) {
    const item = state.pending.find((p) => p.client_id === frame.client_id);
    if (!item) {
      showLocalNotice(`Error: ${frame.message}`);
      return;
    }
    if (frame.retryable) {
      item.state = "error";
      updateBubble(item);
      setTimeout(() => {
        if (state.pending.includes(item)) resend(item);
      }, RETRY_MS);
      return;
    }
    forgetPending(item.client_id);
    item.state = "failed";
    item.error = frame.message;
    updateBubble(item);
  }

  function onConversations(frame) {
    for (const summary of frame.conversations) {
      const conv = conversation(summary.conversation_id);
      if (summary.last_message) conv.preview = clip(summary.last_message, 80);
      if (!conv.title && summary.last_message) conv.title = clip(summary.last_message, 60);
      conv.updatedAt = summary.updated_at;
    }
    renderList();
  }

  function forgetPending(clientId) {
    const index = state.pending.findIndex((p) => p.client_id === clientId);
    if (index < 0) return null;
    const [item] = state.pending.splice(index, 1);
    savePending();
    return item;
  }

  // Rendering durable messages

  function messageElement(kind, text) {
    const div = document.createElement("div");
    div.className = `msg ${kind}`;
    div.dataset.testid = "message";
    div.dataset.kind = kind;
    if (kind === "user") div.textContent = text;
    else div.innerHTML = renderMarkdown(text);
    return div;
  }

  function firstPendingBubble() {
    return el.messages.querySelector(
      '.msg.user[data-state="sending"], .msg.user[data-state="error"]',
    );
  }

  function showEvent(event) {
    const stick = nearBottom();
    el.messages.querySelector(".empty")?.remove();
    if (event.client_id) {
      el.messages.querySelector(`[data-client-id="${CSS.escape(event.client_id)}"]`)?.remove();
    }
    const node = messageElement(event.kind, event.text);
    node.dataset.seq = String(event.seq);
    const index = state.lives.findIndex((l) => l.sessionId === event.session_id);
    if (event.kind === "reply" && index >= 0) {
      const [live] = state.lives.splice(index, 1);
      finishLive(live);
      live.container.after(node);
    } else {
      el.messages.insertBefore(node, firstPendingBubble());
    }
    if (stick) scrollToBottom();
  }

  function bubbleFor(item) {
    return el.messages.querySelector(`[data-client-id="${CSS.escape(item.client_id)}"]`);
  }

  function updateBubble(item) {
    if (item.conversation_id !== state.current) return;
    let node = bubbleFor(item);
    if (!node) {
      if (item.state === "sent") return;
      node = messageElement("user", item.text);
      node.dataset.clientId = item.client_id;
      el.messages.querySelector(".empty")?.remove();
      el.messages.append(node);
      scrollToBottom();
    }
    node.dataset.state = item.state;
    node.querySelector(".msg-status")?.remove();
    const label = {
      sending: "Sending…",
      error: "Not sent — retrying…",
      failed: `Not sent: ${item.error}`,
    };
    if (!label[item.state]) return;
    const status = document.createElement("span");
    status.className = "msg-status";
    status.dataset.testid = "message-status";
    status.textContent = label[item.state];
    if (item.state === "failed") status.append(retryButton(item));
    node.append(status);
  }

  function retryButton(item) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "button";
    button.textContent = "Retry";
    button.addEventListener("click", () => {
      state.pending.push({ ...item, state: "sending", error: undefined });
      savePending();
      resend(state.pending.at(-1));
    });
    return button;
  }

  function showLocalNotice(text) {
    const node = messageElement("notice", text);
    node.dataset.testid = "client-error";
    el.messages.append(node);
    scrollToBottom();
  }

  // Live turn

  function onLive(frame) {
    if (frame.type === "turn_start") {
      startLive(frame);
      return;
    }
    const last = state.lives.at(-1);
    const live = last && !last.ended ? last : startLive(frame);
    if (frame.type === "delta") appendDelta(live, frame.text);
    else if (frame.type === "tool_start") startTool(live, frame);
    else if (frame.type === "tool_end") endTool(live, frame);
    else if (frame.type === "turn_end") endLive(live, frame.stop_reason);
  }

  function startLive(frame) {
    dropUnfinishedLives();
    const container = document.createElement("div");
    container.className = "turn";
    container.dataset.testid = "live-turn";
    el.messages.querySelector(".empty")?.remove();
    el.messages.append(container);
    const live = {
      sessionId: frame.session_id,
      container,
      segment: null,
      text: "",
      ended: false,
      frame: 0,
    };
    state.lives.push(live);
    return live;
  }

  function dropUnfinishedLives() {
    for (const live of state.lives.filter((l) => !l.ended)) live.container.remove();
    state.lives = state.lives.filter((l) => l.ended);
  }

  /** A turn that stopped normally has a reply coming; an aborted or failed one keeps its text. */
  function endLive(live, stopReason) {
    live.ended = true;
    live.container.dataset.stopReason = stopReason;
    live.segment?.classList.remove("cursor");
    if (stopReason === "stop" || stopReason === "max_iterations") return;
    live.segment?.classList.add("intermediate");
    state.lives = state.lives.filter((l) => l !== live);
  }

  function appendDelta(live, text) {
    if (!live.segment) {
      live.segment = document.createElement("div");
      live.segment.className = "msg live cursor";
      live.segment.dataset.testid = "live-reply";
      live.text = "";
      live.container.append(live.segment);
    }
    live.text += text;
    // Re-render at most once per frame: deltas can arrive far faster than paints.
    if (live.frame) return;
    live.frame = requestAnimationFrame(() => {
      live.frame = 0;
      const stick = nearBottom();
      if (live.segment) live.segment.innerHTML = renderMarkdown(live.text);
      if (stick) scrollToBottom();
    });
  }

  function startTool(live, frame) {
    if (live.segment) {
      live.segment.classList.remove("cursor");
      live.segment.classList.add("intermediate");
      live.segment = null;
    }
    const details = document.createElement("details");
    details.className = "tool";
    details.dataset.testid = "tool-call";
    details.dataset.toolCallId = frame.tool_call_id;
    details.dataset.state = "running";
    const summary = document.createElement("summary");
    const command = document.createElement("code");
    command.textContent = `${frame.name} ${toolLabel(frame.arguments)}`;
    const status = document.createElement("span");
    status.className = "tool-state";
    status.textContent = "running…";
    summary.append(command, status);
    details.append(summary);
    live.container.append(details);
    if (nearBottom()) scrollToBottom();
  }

  function endTool(live, frame) {
    const selector = `[data-tool-call-id="${CSS.escape(frame.tool_call_id)}"]`;
    const details = live.container.querySelector(selector);
    if (!details) return;
    details.dataset.state = frame.is_error ? "error" : "done";
    details.querySelector(".tool-state").textContent = frame.is_error ? "failed" : "done";
    const output = document.createElement("pre");
    output.dataset.testid = "tool-output";
    output.textContent = frame.output || "(no output)";
    details.append(output);
  }

  /** The command of a terminal call, or the first argument of another tool. */
  function toolLabel(args) {
    try {
      const parsed = JSON.parse(args);
      const value = parsed.command ?? parsed.path ?? Object.values(parsed)[0] ?? "";
      return clip(typeof value === "string" ? value : JSON.stringify(value), 120);
    } catch {
      return clip(args, 120);
    }
  }

  /** The durable reply takes the place of the streamed text after the last tool call. */
  function finishLive(live) {
    if (live.frame) cancelAnimationFrame(live.frame);
    live.segment?.remove();
    live.segment = null;
    live.container.dataset.testid = "turn";
    if (!live.container.hasChildNodes()) live.container.remove();
  }

  // Page structure

  function render() {
    el.messages.replaceChildren();
    state.lives = [];
    const conv = state.current ? conversation(state.current) : null;
    el.title.textContent = conv?.title || "New chat";
    document.title = conv?.title ? `${conv.title} — Keel` : "Keel";
    if (
      !conv ||
      (conv.events.length === 0 && !state.pending.some((p) => p.conversation_id === conv.id))
    ) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "Send a message to start.";
      el.messages.append(empty);
    }
    for (const event of conv?.events ?? []) {
      const node = messageElement(event.kind, event.text);
      node.dataset.seq = String(event.seq);
      el.messages.append(node);
    }
    for (const item of state.pending)
      if (item.conversation_id === state.current) updateBubble(item);
    scrollToBottom();
    renderList();
  }

  function renderList() {
    const items = [...state.conversations.values()]
      .filter((c) => c.events.length > 0 || c.preview || c.id === state.current)
      .sort((a, b) => b.updatedAt - a.updatedAt);
    el.list.replaceChildren(
      ...items.map((conv) => {
        const li = document.createElement("li");
        const button = document.createElement("button");
        button.type = "button";
        button.dataset.testid = "conversation-item";
        button.dataset.conversationId = conv.id;
        button.setAttribute("aria-current", String(conv.id === state.current));
        const title = document.createElement("span");
        title.textContent = conv.title || "New chat";
        const preview = document.createElement("span");
        preview.className = "preview";
        preview.textContent = conv.preview;
        button.append(title, preview);
        button.addEventListener("click", () => switchTo(conv.id));
        li.append(button);
        return li;
      }),
    );
  }

  function switchTo(id) {
    if (state.current && state.current !== id)
      send({ type: "close", conversation_id: state.current });
    state.current = id;
    localStorage.setItem(CURRENT_KEY, id);
    conversation(id);
    render();
    openCurrent();
    setSidebar(false);
    el.input.focus();
  }

  function newConversation() {
    switchTo(randomId());
  }

  function submit() {
    const text = el.input.value;
    if (text.trim() === "") return;
    if (!state.current) newConversation();
    const conv = conversation(state.current);
    if (!conv.title) conv.title = clip(text, 60);
    conv.preview = clip(text, 80);
    conv.updatedAt = Date.now();
    el.title.textContent = conv.title;
    const item = { client_id: randomId(), conversation_id: conv.id, text, state: "sending" };
    state.pending.push(item);
    savePending();
    el.input.value = "";
    autosize();
    resend(item);
    renderList();
  }

  function nearBottom() {
    const m = el.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function scrollToBottom() {
    el.messages.scrollTop = el.messages.scrollHeight;
  }

  function autosize() {
    el.input.style.height = "auto";
    el.input.style.height = `${el.input.scrollHeight + 2}px`;
  }

  function setSidebar(open) {
    el.sidebar.classList.toggle("open", open);
    el.scrim.hidden = !open;
    el.toggle.setAttribute("aria-expanded", String(open));
  }

  function bindUi() {
    el.composer.addEventListener("submit", (e) => {
      e.preventDefault();
      submit();
    });
    el.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        submit();
      }
    });
    el.input.addEventListener("input", autosize);
    el.newButton.addEventListener("click", newConversation);
    el.toggle.addEventListener("click", () => setSidebar(!el.sidebar.classList.contains("open")));
    el.scrim.addEventListener("click", () => setSidebar(false));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape") setSidebar(false);
    });
    window.addEventListener("online", () => {
      if (!state.connected) connect();
    });
  }

  return {
    start() {
      bindUi();
      if (state.current) conversation(state.current);
      render();
      connect();
      el.input.focus();
    },
  };
}

createChat().start();
