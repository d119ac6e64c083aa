/**
 * The web chat page: speaks docs/webchat-protocol.md over /ws. Durable events (user
 * messages, replies, notices) carry a seq and are shown once each; live frames stream the
 * running turn and are replaced by the durable reply. Unacked messages are kept in
 * localStorage and resent with the same client_id after a reconnect or a reload.
 */
import { createChatSocket } from "./chat-socket.js";
import { icon } from "./icons.js";
import { clip, createLiveTurns, storedToolElement } from "./live-turn.js";
import { renderMarkdown } from "./markdown.js";

const PENDING_KEY = "keel.chat.pending";
const CURRENT_KEY = "keel.chat.current";
const RETRY_MS = 3_000;
/** A user message answering an approval (what the card's buttons send). */
const ANSWER_COMMAND = /^[/!](?:approve|deny)\s+(\S+)/;

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
    fileInput: document.getElementById("file-input"),
    attachButton: document.getElementById("attach-button"),
    attachments: document.getElementById("attachments"),
  };
  /** Files picked, pasted or dropped for the next message (uploaded when it is sent). */
  let picked = [];
  const state = {
    conversations: new Map(),
    current: localStorage.getItem(CURRENT_KEY),
    pending: readJson(localStorage, PENDING_KEY, []),
  };
  const live = createLiveTurns({ messages: el.messages, nearBottom, scrollToBottom });
  const socket = createChatSocket({
    onFrame: handleFrame,
    onOnline,
    onOffline: () => {
      el.banner.hidden = false;
    },
    onLoggedOut: () => {
      el.banner.textContent =
        "Not logged in (or the session ended): open the login link that `keel open` prints.";
      el.banner.dataset.loggedOut = "true";
    },
  });

  function conversation(id) {
    let conv = state.conversations.get(id);
    if (!conv) {
      conv = {
        id,
        title: "",
        // True once the title is the first user message (a summary may guess it first).
        titleFromUser: false,
        preview: "",
        updatedAt: Date.now(),
        events: [],
        lastSeq: 0,
        outboxIds: new Set(),
        // Approval id -> what its card says once answered; null: an answer was sent, none came.
        answers: new Map(),
      };
      state.conversations.set(id, conv);
    }
    return conv;
  }

  function savePending() {
    localStorage.setItem(PENDING_KEY, JSON.stringify(state.pending));
  }

  function send(frame) {
    socket.send(frame);
  }

  function onOnline() {
    el.banner.hidden = true;
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
      ...(item.attachments?.length ? { attachments: item.attachments } : {}),
    });
  }

  // Frames from the server

  function handleFrame(frame) {
    switch (frame.type) {
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
        if (frame.conversation_id === state.current) live.onLive(frame);
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
    if (event.kind === "approval_answered") {
      conv.answers.set(event.approval_id, event.text);
      if (event.conversation_id === state.current) showAnswer(event.approval_id, event.text);
      return;
    }
    const answering = event.kind === "user" && ANSWER_COMMAND.exec(event.text);
    if (answering && !conv.answers.has(answering[1])) conv.answers.set(answering[1], null);
    conv.events.push(event);
    if (event.kind === "user" && !conv.titleFromUser) setTitle(conv, event.text);
    if (event.kind !== "tool") conv.preview = clip(event.text, 80);
    conv.updatedAt = event.created_at || Date.now();
    if (event.kind === "user" && event.client_id) forgetPending(event.client_id);
    if (event.conversation_id === state.current) showEvent(event);
    renderList();
  }

  function onSynced(frame) {
    // The durable history is authoritative; a running turn comes back as a snapshot.
    if (frame.conversation_id === state.current) live.dropUnfinished();
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
      if (summary.title && !conv.titleFromUser) setTitle(conv, summary.title);
      else if (!conv.title && summary.last_message) conv.title = clip(summary.last_message, 60);
      conv.updatedAt = summary.updated_at;
    }
    renderList();
  }

  function setTitle(conv, text) {
    conv.title = clip(text, 60);
    conv.titleFromUser = true;
    if (conv.id === state.current) showTitle(conv);
  }

  function showTitle(conv) {
    el.title.textContent = conv?.title || "New chat";
    document.title = conv?.title ? `${conv.title} — Keel` : "Keel";
  }

  function forgetPending(clientId) {
    const index = state.pending.findIndex((p) => p.client_id === clientId);
    if (index < 0) return null;
    const [item] = state.pending.splice(index, 1);
    savePending();
    return item;
  }

  // Rendering durable messages

  /** The element of a stored event: a message, or a tool call the agent made. */
  function eventElement(event) {
    if (event.kind === "tool" && event.tool) return storedToolElement(event.tool);
    return messageElement(event.kind, event.text, event.approval_id, event.file, event.attachments);
  }

  function messageElement(kind, text, approvalId, file, attachments) {
    const div = document.createElement("div");
    div.className = `msg ${kind}`;
    div.dataset.testid = "message";
    div.dataset.kind = kind;
    if (kind === "user") div.textContent = text;
    else div.innerHTML = renderMarkdown(text);
    if (file) div.prepend(fileElement(file));
    for (const a of attachments ?? []) {
      const chip = document.createElement("span");
      chip.className = "attachment-chip";
      chip.dataset.testid = "message-attachment";
      chip.append(icon("paperclip"), a.name);
      div.append(chip);
    }
    if (approvalId) div.append(approvalCard(approvalId));
    return div;
  }

  /** A file the agent sent: images inline, anything else as a download link. */
  function fileElement(file) {
    const link = document.createElement("a");
    link.href = file.url;
    link.dataset.testid = "file";
    if (/^image\/(jpeg|png|gif|webp)$/.test(file.mime)) {
      link.target = "_blank";
      link.rel = "noopener";
      const img = document.createElement("img");
      img.src = file.url;
      img.alt = file.name;
      img.className = "sent-image";
      link.append(img);
    } else {
      link.download = file.name;
      link.append(icon("paperclip"), ` ${file.name}`);
    }
    return link;
  }

  /**
   * An approval card's answers: each sends the chat command, so it is stored like any message.
   * Once the approval is answered (here or elsewhere) the card says how, without buttons.
   */
  function approvalCard(id) {
    const bar = document.createElement("div");
    bar.className = "approval-buttons";
    bar.dataset.testid = "approval";
    bar.dataset.approvalId = id;
    bar.dataset.state = "pending";
    const choices = [
      ["approve", "Approve once", `/approve ${id}`],
      ["approve-session", "This session", `/approve ${id} session`],
      ["deny", "Deny", `/deny ${id}`],
    ];
    for (const [testid, label, command] of choices) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = label;
      button.dataset.testid = testid;
      button.addEventListener("click", () => {
        markAnswering(bar);
        sendText(command);
      });
      bar.append(button);
    }
    const answers = state.current ? conversation(state.current).answers : new Map();
    if (answers.get(id)) markAnswered(bar, answers.get(id));
    else if (answers.has(id)) markAnswering(bar);
    return bar;
  }

  function markAnswering(bar) {
    bar.dataset.state = "answering";
    for (const b of bar.querySelectorAll("button")) b.disabled = true;
  }

  /** `text` is the card's new text: its first line says who decided what. */
  function markAnswered(bar, text) {
    const answer = document.createElement("span");
    answer.className = "approval-answer";
    answer.dataset.testid = "approval-answer";
    answer.textContent = String(text).split("\n", 1)[0] || "Answered";
    bar.dataset.state = "answered";
    bar.replaceChildren(answer);
  }

  function showAnswer(id, text) {
    const bar = el.messages.querySelector(
      `[data-testid=approval][data-approval-id="${CSS.escape(id)}"]`,
    );
    if (bar) markAnswered(bar, text);
  }

  function firstPendingBubble() {
    return el.messages.querySelector(
      '.msg.user[data-state="sending"], .msg.user[data-state="error"]',
    );
  }

  function showEvent(event) {
    const stick = nearBottom();
    el.messages.querySelector(".empty")?.remove();
    // A tool call already shown live (the turn runs on this page) stays where it is.
    const toolId = event.tool?.tool_call_id;
    if (toolId && el.messages.querySelector(`[data-tool-call-id="${CSS.escape(toolId)}"]`)) return;
    const node = eventElement(event);
    node.dataset.seq = String(event.seq);
    const bubble =
      event.client_id &&
      el.messages.querySelector(`[data-client-id="${CSS.escape(event.client_id)}"]`);
    // The stored message takes its bubble's place: the turn answering it may already be shown
    // below it (a turn starts as soon as the message is committed).
    if (bubble) bubble.replaceWith(node);
    else if (!placeReply(event, node) && !live.placeWithin(node))
      el.messages.insertBefore(node, firstPendingBubble());
    if (stick) scrollToBottom();
  }

  /** A turn's reply takes the place of its streamed text; false when it is not such a reply. */
  function placeReply(event, node) {
    // A file goes out during the turn: the live reply bubble stays for the reply itself.
    return event.kind === "reply" && !event.file && live.placeReply(event.session_id, node);
  }

  function bubbleFor(item) {
    return el.messages.querySelector(`[data-client-id="${CSS.escape(item.client_id)}"]`);
  }

  function updateBubble(item) {
    if (item.conversation_id !== state.current) return;
    let node = bubbleFor(item);
    if (!node) {
      if (item.state === "sent") return;
      node = messageElement("user", item.text, null, null, item.attachments);
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

  // Page structure

  function render() {
    el.messages.replaceChildren();
    live.reset();
    const conv = state.current ? conversation(state.current) : null;
    showTitle(conv);
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
      const node = eventElement(event);
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

  async function submit() {
    const text = el.input.value;
    if (text.trim() === "" && picked.length === 0) return;
    let attachments = [];
    if (picked.length > 0) {
      try {
        attachments = await uploadPicked();
      } catch (err) {
        showAttachments(String(err instanceof Error ? err.message : err));
        return;
      }
    }
    sendText(text, attachments);
    el.input.value = "";
    autosize();
  }

  function sendText(text, attachments = []) {
    if (!state.current) newConversation();
    const conv = conversation(state.current);
    const label = text.trim() || attachments.map((a) => a.name).join(", ");
    if (!conv.titleFromUser) setTitle(conv, label);
    conv.preview = clip(label, 80);
    conv.updatedAt = Date.now();
    const item = { client_id: randomId(), conversation_id: conv.id, text, state: "sending" };
    if (attachments.length > 0) item.attachments = attachments;
    state.pending.push(item);
    savePending();
    resend(item);
    renderList();
  }

  // Attachments: uploaded over HTTP first (the WebSocket carries only their ids)

  function pick(files) {
    picked = [...picked, ...files].slice(0, 10);
    showAttachments();
  }

  function showAttachments(error) {
    el.attachments.replaceChildren();
    el.attachments.hidden = picked.length === 0 && !error;
    for (const [index, file] of picked.entries()) {
      const chip = document.createElement("span");
      chip.className = "attachment-chip";
      chip.dataset.testid = "pending-attachment";
      chip.append(icon("paperclip"), file.name);
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "chip-remove";
      remove.setAttribute("aria-label", `Remove ${file.name}`);
      remove.textContent = "×";
      remove.addEventListener("click", () => {
        picked.splice(index, 1);
        showAttachments();
      });
      chip.append(remove);
      el.attachments.append(chip);
    }
    if (error) {
      const note = document.createElement("span");
      note.className = "attachment-error";
      note.dataset.testid = "attachment-error";
      note.textContent = error;
      el.attachments.append(note);
    }
  }

  async function uploadPicked() {
    const out = [];
    for (const file of picked) {
      const response = await fetch("./uploads", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": file.type || "application/octet-stream" },
        body: file,
      });
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        throw new Error(
          `${file.name}: ${body.error?.message ?? `upload failed (${response.status})`}`,
        );
      }
      out.push({
        upload_id: body.id,
        name: file.name || "pasted-image.png",
        mime: file.type || "application/octet-stream",
        size: body.size,
      });
    }
    picked = [];
    showAttachments();
    return out;
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
    // The keyboard hint wraps on a phone, where Enter is often not even a key.
    if (matchMedia("(max-width: 720px)").matches) el.input.placeholder = "Message Keel";
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
    el.attachButton.addEventListener("click", () => el.fileInput.click());
    el.fileInput.addEventListener("change", () => {
      pick([...el.fileInput.files]);
      el.fileInput.value = "";
    });
    el.input.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files ?? [])];
      if (files.length === 0) return;
      e.preventDefault();
      pick(files);
    });
    for (const target of [el.messages, el.composer]) {
      target.addEventListener("dragover", (e) => {
        if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
      });
      target.addEventListener("drop", (e) => {
        const files = [...(e.dataTransfer?.files ?? [])];
        if (files.length === 0) return;
        e.preventDefault();
        pick(files);
      });
    }
    el.newButton.addEventListener("click", newConversation);
    el.toggle.addEventListener("click", () => setSidebar(!el.sidebar.classList.contains("open")));
    el.scrim.addEventListener("click", () => setSidebar(false));
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape") setSidebar(false);
    });
  }

  return {
    start() {
      bindUi();
      if (state.current) conversation(state.current);
      render();
      socket.connect();
      el.input.focus();
    },
  };
}

createChat().start();
