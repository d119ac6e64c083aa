/**
 * The dashboard: gateway status (live from the SSE stream, polling as a fallback), approvals
 * waiting for an operator (answered here), running turns, recent sessions with their state,
 * usage and transcripts, and the drain/restart controls. Requests carry the browser's session
 * cookie (set by the login link); the page never holds a token.
 */

import { createBudgetsPanel, el } from "./dashboard-budgets.js";

const POLL_MS = 2_000;
const STREAM_RETRY_MS = 15_000;
const SESSIONS_REFRESH_MS = 10_000;
const APPROVALS_REFRESH_MS = 3_000;

class AuthError extends Error {}

function $(id) {
  return document.getElementById(id);
}

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text ?? "";
  if (className) td.className = className;
  return td;
}

function row(...cells) {
  const tr = document.createElement("tr");
  tr.append(...cells);
  return tr;
}

function emptyRow(columns, text) {
  const td = cell(text, "muted");
  td.colSpan = columns;
  return row(td);
}

function stateBadge(value) {
  const span = document.createElement("span");
  span.className = "state";
  span.dataset.state = value;
  span.textContent = value;
  return span;
}

function duration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const parts = [];
  if (s >= 86_400) parts.push(`${Math.floor(s / 86_400)}d`);
  if (s >= 3_600) parts.push(`${Math.floor((s % 86_400) / 3_600)}h`);
  if (s >= 60) parts.push(`${Math.floor((s % 3_600) / 60)}m`);
  parts.push(`${s % 60}s`);
  return parts.join(" ");
}

function time(value) {
  if (value == null) return "";
  const date = new Date(typeof value === "number" ? value : String(value));
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

/** "12s ago", or a dash when nothing happened yet. */
function age(value) {
  if (value == null) return "none since start";
  return `${duration((Date.now() - epochMs(value)) / 1000)} ago`;
}

function tokens(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

function money(value) {
  if (value == null) return "";
  return value < 0.01 && value > 0 ? value.toFixed(4) : value.toFixed(2);
}

function epochMs(value) {
  if (typeof value === "number") return value < 1e12 ? value * 1000 : value;
  return Date.parse(String(value));
}

function createDashboard() {
  const state = {
    status: null,
    statusAt: 0,
    /** Session id → title, for naming the session an approval belongs to. */
    titles: new Map(),
    abort: new AbortController(),
  };

  async function api(path, init = {}) {
    const response = await fetch(path, {
      ...init,
      credentials: "same-origin",
      signal: init.signal ?? state.abort.signal,
    });
    if (response.status === 401) {
      showLoginNeeded();
      throw new AuthError("unauthorized");
    }
    return response;
  }

  async function getJson(path) {
    const response = await api(path);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response.json();
  }

  function showLoginNeeded() {
    state.abort.abort();
    $("login-needed").hidden = false;
    $("overview").hidden = true;
    $("transcript-view").hidden = true;
  }

  function banner(text) {
    $("dash-banner").hidden = !text;
    $("dash-banner").textContent = text ?? "";
  }

  // Status

  function renderStatus(status) {
    state.status = status;
    state.statusAt = Date.now();
    banner(null);
    const gatewayState =
      status.draining && status.gateway_state === "running" ? "draining" : status.gateway_state;
    const badge = $("gateway-state");
    badge.textContent = gatewayState;
    badge.dataset.state = gatewayState;
    $("version").textContent = status.version ?? "–";
    $("pid").textContent = String(status.pid ?? "–");
    $("active-turns").textContent = String(status.active_turns ?? 0);
    const sessions = status.sessions ?? {};
    $("session-count").textContent = `${sessions.total ?? 0} (${sessions.resume_pending ?? 0})`;
    // Disabled until the first status: before it, the session may be missing or the gateway down.
    $("restart-button").disabled = false;
    $("drain-button").disabled = Boolean(status.draining);
    $("cancel-drain-button").disabled = !status.draining;
    renderUptime();
    // MCP servers share the table: a down server is as visible as a down platform.
    const mcp = Object.entries(status.mcp ?? {}).map(([name, m]) => [`mcp ${name}`, m]);
    renderPlatforms({ ...(status.platforms ?? {}), ...Object.fromEntries(mcp) });
    renderTurns(status.turns ?? []);
    renderTasks(status.tasks ?? []);
    renderInstances(status.instances);
  }

  /** Only on a store shared by several gateways (Postgres): each of them, alive or dead. */
  function renderInstances(instances) {
    $("instances-section").hidden = !instances;
    if (!instances) return;
    const rows = instances.map((i) => {
      const idCell = cell(i.self ? `${i.id} (this one)` : i.id);
      const stateCell = document.createElement("td");
      stateCell.append(stateBadge(i.alive ? "alive" : "dead"));
      if (!i.alive) {
        const silent = document.createElement("span");
        silent.className = "muted";
        silent.textContent = ` silent ${duration(i.heartbeat_age_seconds ?? 0)}`;
        stateCell.append(silent);
      }
      const tr = row(
        idCell,
        cell(i.host),
        cell(String(i.pid)),
        cell(time(i.started_at)),
        cell(time(i.heartbeat_at)),
        stateCell,
        cell(
          i.sessions.length ? `${i.sessions.length}: ${i.sessions.join(", ")}` : "0",
          "truncate",
        ),
      );
      tr.dataset.instance = i.id;
      tr.dataset.alive = String(i.alive);
      if (i.self) tr.dataset.self = "true";
      return tr;
    });
    $("instances-body").replaceChildren(...rows);
  }

  function renderUptime() {
    const status = state.status;
    if (!status) return;
    const elapsed = (Date.now() - state.statusAt) / 1000;
    $("uptime").textContent = duration((status.uptime_seconds ?? 0) + elapsed);
  }

  function renderPlatforms(platforms) {
    const rows = Object.entries(platforms).map(([name, p]) => {
      const stateCell = document.createElement("td");
      stateCell.append(stateBadge(p.state));
      stateCell.dataset.testid = "platform-state";
      // MCP servers have no events of their own: their column stays empty.
      const event = "last_event_at" in p ? age(p.last_event_at) : "";
      const eventCell = cell(event);
      eventCell.dataset.testid = "platform-last-event";
      const tr = row(
        cell(name),
        stateCell,
        eventCell,
        cell(p.error ?? "", p.error ? "error-text" : ""),
      );
      tr.dataset.platform = name;
      return tr;
    });
    $("platforms-body").replaceChildren(...(rows.length ? rows : [emptyRow(4, "No platforms.")]));
  }

  function renderTurns(turns) {
    const rows = turns.map((t) => {
      const link = document.createElement("a");
      link.href = `#session=${encodeURIComponent(t.session_id)}`;
      link.textContent = state.titles.get(t.session_id) ?? t.session_key;
      link.title = t.session_key;
      const sessionCell = document.createElement("td");
      sessionCell.append(link);
      const runningFor = duration((Date.now() - epochMs(t.started_at)) / 1000);
      return row(sessionCell, cell(runningFor), cell(t.current_tool ?? "—"));
    });
    $("turns-body").replaceChildren(...(rows.length ? rows : [emptyRow(3, "No turn is running.")]));
  }

  /** Subagents and background tasks running or waiting for a slot. */
  function renderTasks(tasks) {
    const rows = tasks.map((t) => {
      const kind = t.background ? "background" : "delegated";
      const since = t.started_at ? duration((Date.now() - epochMs(t.started_at)) / 1000) : "—";
      const tr = row(
        cell(`${t.id} (${kind})`),
        cell(t.state),
        cell(t.chat),
        cell(since),
        cell(t.prompt),
      );
      tr.dataset.task = String(t.id);
      return tr;
    });
    $("tasks-body").replaceChildren(...(rows.length ? rows : [emptyRow(5, "No task is running.")]));
  }

  /** Reads the SSE stream until it ends; each `data:` line is one status JSON. */
  async function readStream() {
    const response = await api("/api/status/stream", { headers: { Accept: "text/event-stream" } });
    if (!response.ok || !response.body) throw new Error(`stream: HTTP ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const lines = buffer.split(/\r?\n/);
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        if (line.startsWith("data:")) renderStatus(JSON.parse(line.slice(5)));
      }
    }
  }

  async function pollOnce() {
    try {
      renderStatus(await getJson("/api/status"));
    } catch (err) {
      if (!(err instanceof AuthError) && err.name !== "AbortError")
        banner("Gateway unreachable — retrying…");
    }
  }

  /** Streams while the stream works; polls every 2 s in between attempts to reopen it. */
  async function liveStatus(signal) {
    while (!signal.aborted) {
      try {
        await readStream();
      } catch (err) {
        if (err instanceof AuthError || signal.aborted) return;
      }
      const until = Date.now() + STREAM_RETRY_MS;
      while (!signal.aborted && Date.now() < until) {
        await pollOnce();
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    }
  }

  // Approvals

  async function loadApprovals() {
    try {
      const { approvals } = await getJson("/api/approvals");
      const cards = approvals.map(approvalCard);
      if (cards.length === 0) {
        cards.push(el("p", "Nothing waits for approval.", "muted"));
      }
      $("approvals-list").replaceChildren(...cards);
    } catch (err) {
      if (!(err instanceof AuthError) && err.name !== "AbortError")
        banner("Could not load approvals.");
    }
  }

  /** One waiting call: what runs (whole, as it will run), for whom, why it asks, and the answers. */
  function approvalCard(a) {
    const card = el("div", undefined, "dash-approval");
    card.dataset.testid = "approval";
    card.dataset.approvalId = a.id;
    const session = state.titles?.get(a.session_id) ?? a.session_key;
    const who = a.requester ? ` · asked by ${a.requester}` : "";
    const head = el("div");
    head.append(
      el("strong", a.tool),
      el("span", ` in ${session}${who} · until ${time(a.deadline_at)}`, "muted"),
    );
    const command = el("pre", a.summary, "command");
    command.dataset.testid = "approval-command";
    const reason = el("div", a.reason ?? "", "muted");
    const actions = el("div", undefined, "approval-actions");
    const result = el("span", undefined, "muted");
    result.dataset.testid = "approval-result";
    const approve = button("Approve", "button primary", "approve-button");
    const deny = button("Deny", "button danger", "deny-button");
    const decide = async (decision, label) => {
      approve.disabled = true;
      deny.disabled = true;
      result.textContent = `${label}…`;
      try {
        const response = await api(`/api/approvals/${encodeURIComponent(a.id)}`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({ decision }),
        });
        const body = await response.json().catch(() => ({}));
        if (response.ok) {
          result.textContent = `${label}.`;
          card.dataset.decided = decision;
        } else {
          // Answered meanwhile (in the chat, by the CLI): the server says by whom.
          result.textContent = body?.error?.message ?? `HTTP ${response.status}`;
        }
      } catch (err) {
        if (!(err instanceof AuthError)) result.textContent = `Failed: ${err.message}`;
      }
      setTimeout(loadApprovals, 1_500);
    };
    approve.addEventListener("click", () => decide("approve", "Approved"));
    deny.addEventListener("click", () => decide("deny", "Denied"));
    actions.append(approve, deny, result);
    card.append(head, command, reason, actions);
    return card;
  }

  function button(text, className, testid) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = className;
    b.textContent = text;
    b.dataset.testid = testid;
    return b;
  }

  // Sessions and transcripts

  async function loadSessions() {
    try {
      const { sessions, total_usage: total } = await getJson("/api/sessions");
      const recent = [...sessions]
        .sort((a, b) => epochMs(b.updated_at) - epochMs(a.updated_at))
        .slice(0, 50);
      state.titles = new Map(sessions.map((s) => [s.session_id, s.title]));
      $("sessions-body").replaceChildren(
        ...(recent.length ? recent.map(sessionRow) : [emptyRow(8, "No sessions yet.")]),
      );
      if (total) {
        const cost = total.cost == null ? "" : ` (${money(total.cost)})`;
        $("total-usage").textContent =
          `${tokens(total.prompt_tokens)} / ${tokens(total.completion_tokens)}${cost}`;
      }
    } catch (err) {
      if (!(err instanceof AuthError) && err.name !== "AbortError")
        banner("Could not load sessions.");
    }
  }

  function sessionRow(s) {
    const link = document.createElement("a");
    link.href = `#session=${encodeURIComponent(s.session_id)}`;
    link.textContent = s.title ?? s.key;
    link.title = s.key;
    link.dataset.testid = "session-link";
    const key = document.createElement("span");
    key.className = "session-key muted";
    key.textContent = s.key;
    const keyCell = document.createElement("td");
    keyCell.className = "truncate";
    keyCell.append(link, key);
    const stateCell = document.createElement("td");
    stateCell.dataset.testid = "session-state";
    stateCell.append(stateBadge(s.state ?? ""));
    const usage = s.usage ?? {};
    const tr = row(
      keyCell,
      cell(s.platform ?? ""),
      stateCell,
      cell(String(s.message_count ?? 0)),
      cell(s.last_message ?? "", "truncate"),
      cell(time(s.updated_at)),
      cell(`${tokens(usage.prompt_tokens)} / ${tokens(usage.completion_tokens)}`),
      cell(money(usage.cost)),
    );
    tr.dataset.sessionKey = s.key;
    return tr;
  }

  async function showTranscript(sessionId) {
    $("overview").hidden = true;
    $("transcript-view").hidden = false;
    $("transcript-title").textContent = `Session ${sessionId}`;
    $("transcript").replaceChildren();
    $("transcript-usage").textContent = "";
    try {
      const { session, messages, usage, compaction } = await getJson(
        `/api/sessions/${encodeURIComponent(sessionId)}`,
      );
      if (session?.key) {
        const title = state.titles.get(sessionId);
        $("transcript-title").textContent = title
          ? `${title} · ${session.key}`
          : `${session.key} · ${sessionId}`;
      }
      if (usage) $("transcript-usage").textContent = usageLine(usage, compaction);
      $("transcript").replaceChildren(...messages.map(transcriptEntry));
      if (messages.length === 0) $("transcript").textContent = "No messages.";
    } catch (err) {
      if (!(err instanceof AuthError))
        $("transcript").textContent = `Could not load: ${err.message}`;
    }
  }

  function usageLine(usage, compaction) {
    const n = (v) => Number(v).toLocaleString("en-US");
    let text = `Usage: ${usage.calls} model calls, ${n(usage.prompt_tokens)} tokens in, ${n(usage.completion_tokens)} out`;
    if (usage.estimated_calls > 0) text += ` (${usage.estimated_calls} estimated)`;
    if (usage.last_prompt_tokens !== null)
      text += `; last prompt ${n(usage.last_prompt_tokens)} tokens`;
    if (compaction)
      text += `; the model sees messages up to #${compaction.through_seq} as a summary`;
    return `${text}.`;
  }

  function transcriptEntry(m) {
    const entry = el("div", undefined, "entry");
    entry.dataset.testid = "transcript-message";
    entry.dataset.role = m.role;
    const callId = m.tool_call_id ? ` · result of ${m.tool_call_id}` : "";
    entry.append(el("div", `#${m.seq} ${m.role}${callId} · ${time(m.created_at)}`, "meta"));
    if (m.content) entry.append(el("pre", m.content));
    for (const call of m.tool_calls ?? []) {
      const text = `→ ${call.function?.name}(${call.function?.arguments}) [${call.id}]`;
      entry.append(el("pre", text, "muted"));
    }
    return entry;
  }

  function route() {
    const match = /^#session=(.+)$/.exec(location.hash);
    if (!$("login-needed").hidden) return;
    if (match) {
      showTranscript(decodeURIComponent(match[1]));
    } else {
      $("transcript-view").hidden = true;
      $("overview").hidden = false;
    }
  }

  // Actions

  async function action(label, path, body) {
    $("action-result").textContent = `${label}…`;
    try {
      const response = await api(path, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await response.text();
      $("action-result").textContent = response.ok ? `${label}: done.` : `${label} failed: ${text}`;
    } catch (err) {
      if (!(err instanceof AuthError))
        $("action-result").textContent = `${label} failed: ${err.message}`;
    }
  }

  function bind() {
    $("drain-button").addEventListener("click", () =>
      action("Drain", "/api/gateway/drain", { action: "drain" }),
    );
    $("cancel-drain-button").addEventListener("click", () =>
      action("Cancel drain", "/api/gateway/drain", { action: "cancel" }),
    );
    $("restart-button").addEventListener("click", () => {
      if (window.confirm("Restart the gateway? Running turns are drained first.")) {
        action("Restart", "/api/gateway/restart");
      }
    });
    window.addEventListener("hashchange", route);
  }

  function run() {
    state.abort.abort();
    state.abort = new AbortController();
    const signal = state.abort.signal;
    route();
    liveStatus(signal);
    const budgets = createBudgetsPanel({
      api,
      getJson,
      onError: (err) => {
        if (!(err instanceof AuthError) && err.name !== "AbortError")
          banner("Could not load budgets.");
      },
    });
    loadSessions().then(loadApprovals).then(budgets.load);
    const sessionsTimer = setInterval(loadSessions, SESSIONS_REFRESH_MS);
    const approvalsTimer = setInterval(() => {
      loadApprovals();
      budgets.load();
    }, APPROVALS_REFRESH_MS);
    const uptimeTimer = setInterval(() => {
      renderUptime();
      if (state.status) renderTurns(state.status.turns ?? []);
    }, 1000);
    signal.addEventListener("abort", () => {
      clearInterval(sessionsTimer);
      clearInterval(approvalsTimer);
      clearInterval(uptimeTimer);
    });
  }

  return {
    start() {
      bind();
      run();
    },
  };
}

createDashboard().start();
