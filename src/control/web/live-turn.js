/**
 * The running turn of the shown conversation, rendered from live frames: streamed text
 * segments and tool calls. A durable reply later takes the place of the last text segment
 * (see `placeReply`), so the reply is shown exactly once.
 */
import { renderMarkdown } from "./markdown.js";

/** One line of `text`, shortened to `max` characters. */
export function clip(text, max) {
  const line = String(text ?? "")
    .replace(/\s+/g, " ")
    .trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
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

/**
 * A finished tool call from the stored history (a `tool` event), shown as the live one was:
 * its command, whether it worked, and its output folded away.
 */
export function storedToolElement(tool) {
  const details = document.createElement("details");
  details.className = "tool";
  details.dataset.testid = "tool-call";
  details.dataset.toolCallId = tool.tool_call_id;
  details.dataset.state = tool.is_error ? "error" : "done";
  const summary = document.createElement("summary");
  const command = document.createElement("code");
  command.textContent = `${tool.name} ${toolLabel(tool.arguments)}`;
  const status = document.createElement("span");
  status.className = "tool-state";
  status.textContent = tool.is_error ? "failed" : "done";
  summary.append(command, status);
  const output = document.createElement("pre");
  output.dataset.testid = "tool-output";
  output.textContent = tool.output || "(no output)";
  details.append(summary, output);
  return details;
}

/** `view` gives the messages element and the scroll helpers of the page. */
export function createLiveTurns(view) {
  const { messages, nearBottom, scrollToBottom } = view;
  /** Streamed turns still waiting for their durable reply, oldest first. */
  let lives = [];

  function onLive(frame) {
    if (frame.type === "turn_start") {
      startLive(frame);
      return;
    }
    const last = lives.at(-1);
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
    messages.querySelector(".empty")?.remove();
    messages.append(container);
    const live = {
      sessionId: frame.session_id,
      container,
      segment: null,
      text: "",
      ended: false,
      frame: 0,
    };
    lives.push(live);
    return live;
  }

  /** Drops the streamed part of unfinished turns; stored events placed within them stay. */
  function dropUnfinishedLives() {
    for (const live of lives.filter((l) => !l.ended)) {
      live.container.replaceWith(...live.container.querySelectorAll(":scope > [data-seq]"));
    }
    lives = lives.filter((l) => l.ended);
  }

  /** A turn that stopped normally has a reply coming; an aborted or failed one keeps its text. */
  function endLive(live, stopReason) {
    live.ended = true;
    live.container.dataset.stopReason = stopReason;
    flushSegment(live);
    live.segment?.classList.remove("cursor");
    if (stopReason === "stop" || stopReason === "max_iterations") return;
    // No reply will replace this text: say it was cut off, so it is not read as the answer.
    if (live.segment) {
      live.segment.classList.add("intermediate");
      live.segment.dataset.testid = "live-intermediate";
      const status = document.createElement("span");
      status.className = "msg-status";
      status.dataset.testid = "turn-status";
      status.textContent = stopReason === "error" ? "Failed — no reply" : "Interrupted";
      live.segment.append(status);
    }
    lives = lives.filter((l) => l !== live);
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

  /** Renders a segment's text now (a pending animation frame would find it detached). */
  function flushSegment(live) {
    if (live.frame) cancelAnimationFrame(live.frame);
    live.frame = 0;
    if (live.segment) live.segment.innerHTML = renderMarkdown(live.text);
  }

  function startTool(live, frame) {
    if (live.segment) {
      flushSegment(live);
      live.segment.classList.remove("cursor");
      live.segment.dataset.testid = "live-intermediate";
      live.segment.classList.add("intermediate");
      live.segment = null;
    }
    // A page that joins mid-turn replays the stored call first: the live one takes its place.
    messages.querySelector(`[data-tool-call-id="${CSS.escape(frame.tool_call_id)}"]`)?.remove();
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

  /**
   * Puts the durable reply `node` of `sessionId` where its streamed text was: after the turn's
   * tool calls, or in place of a turn that only streamed text. False when no streamed turn of
   * that session is shown (the caller places the reply itself).
   */
  function placeReply(sessionId, node) {
    const index = lives.findIndex((l) => l.sessionId === sessionId);
    if (index < 0) return false;
    const [live] = lives.splice(index, 1);
    if (live.frame) cancelAnimationFrame(live.frame);
    live.segment?.remove();
    live.segment = null;
    live.container.dataset.testid = "turn";
    if (!live.container.isConnected) return false;
    if (live.container.hasChildNodes()) live.container.after(node);
    else live.container.replaceWith(node);
    return true;
  }

  /**
   * Puts a stored event (a notice, say) that arrives while a streamed turn still waits for its
   * reply at the end of that turn: its seq is above the turn's tool calls stored so far and
   * below those still to come and the reply, so it stands where a reload will show it. False
   * when no such turn is shown.
   */
  function placeWithin(node) {
    const live = lives.at(-1);
    if (!live?.container.isConnected) return false;
    // A turn whose reply never came (an empty one) is not waited for once later events follow.
    for (let next = live.container.nextElementSibling; next; next = next.nextElementSibling)
      if (next.dataset.seq) return false;
    if (live.segment) live.container.insertBefore(node, live.segment);
    else live.container.append(node);
    return true;
  }

  /** Forgets every streamed turn (the page shows another conversation). */
  function reset() {
    lives = [];
  }

  return { onLive, placeReply, placeWithin, dropUnfinished: dropUnfinishedLives, reset };
}
