/** Chat commands (`/new`, `/stop`, ...): they act at once and are never queued as text. */

import type { UserContent } from "../agent/content.js";
import type { ChatAddress } from "../contract/platform.js";
import type {
  InboxItem,
  InboxStore,
  SessionRecord,
  SessionStore,
  TurnStore,
} from "../sessions/store.js";
import { cutOffRequest } from "./history.js";
import type { AbortCause, ActiveTurn } from "./lane.js";
import { TEXT } from "./texts.js";

/** `open`: normal; `restarting`/`stopping`: the stop sequence closed admission. */
export type Admission = "open" | "restarting" | "stopping";

/** Gateway-level actions a chat command may ask for. */
export interface GatewayControl {
  /** Starts a restart (idempotent); returns the text to answer the `/restart` with, if any. */
  requestRestart(from: { address: ChatAddress; messageId: string }): Promise<string | null>;
  /** Makes `address` the platform's home channel. */
  setHomeChannel(address: ChatAddress): Promise<void>;
}

/** A chat command another part contributes (`/schedules`): the text it answers with. */
export type ExtraChatCommand = (item: InboxItem, args: string) => Promise<string>;

export interface ChatCommand {
  name: string;
  args: string;
}

/** The slice of the runner a command may use. */
export interface ChatCommandHost {
  store: InboxStore & SessionStore & TurnStore;
  control: GatewayControl;
  laneOf(sessionKey: string): ActiveTurn | null;
  stopTurn(active: ActiveTurn, cause: AbortCause): void;
  retry(sessionKey: string, text: UserContent, address: ChatAddress): void;
  /** Continues a request waiting for its resume now; false when it cannot (too old). */
  resumeNow(session: SessionRecord): boolean;
  answer(item: InboxItem, text: string): Promise<void>;
  /** Answers with the refusal a message gets while the gateway stops or drains. */
  refuse(item: InboxItem): Promise<void>;
  admission(): Admission;
  draining(): boolean;
  /** A command another part contributes, or null. */
  extraCommand(name: string): ExtraChatCommand | null;
  /** Lines other parts add to `/status` (MCP servers). */
  statusLines(): string[];
  /** Lines about the model and its latest calls for `/status` (per session). */
  modelStatusLines?(item: InboxItem): Promise<string[]>;
}

/** `/name args` (a Telegram `/name@bot` suffix is ignored); null for ordinary text. */
export function parseChatCommand(text: string): ChatCommand | null {
  const match = /^\/([A-Za-z][A-Za-z0-9_]*)(?:@\S+)?(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!match) return null;
  return { name: match[1]!.toLowerCase(), args: (match[2] ?? "").trim() };
}

/**
 * Commands that change a session (its transcript, model or running turn). With several gateways
 * on one store they act only under the session's lease, as turns do, so two gateways never act
 * on one session at once; the others read or act on the gateway, not on a session.
 */
export const SESSION_COMMANDS: ReadonlySet<string> = new Set([
  "new",
  "reset",
  "stop",
  "retry",
  "compact",
  "model",
]);

/** Commands that act on the whole gateway: only senders with operator rights may use them. */
export const OPERATOR_COMMANDS: ReadonlySet<string> = new Set(["restart", "sethome"]);

export async function handleChatCommand(
  host: ChatCommandHost,
  item: InboxItem,
  command: ChatCommand,
): Promise<void> {
  if (OPERATOR_COMMANDS.has(command.name) && !item.operator) {
    return host.answer(item, TEXT.operatorOnly(command.name));
  }
  const active = host.laneOf(item.sessionKey);
  switch (command.name) {
    case "new":
    case "reset": {
      if (active) host.stopTurn(active, "new_session");
      await host.store.resetSession(item.sessionKey);
      return host.answer(item, TEXT.newSession);
    }
    case "stop": {
      if (!active) return host.answer(item, TEXT.nothingToStop);
      host.stopTurn(active, "user_stop");
      // The "Stopped." notice follows once the turn has really ended.
      await host.store.closeInboxItem(item.id, "done");
      return;
    }
    case "retry":
      // A retry is new work: refused like any message while stopping or drained.
      if (host.admission() !== "open" || host.draining()) return host.refuse(item);
      return retryLast(host, item, active);
    case "status":
      return host.answer(item, await statusText(host, item, active));
    case "help":
    case "start":
      return host.answer(item, TEXT.help);
    case "restart": {
      const text = await host.control.requestRestart({
        address: item.address,
        messageId: item.platformMessageId,
      });
      if (text) return host.answer(item, text);
      await host.store.closeInboxItem(item.id, "done");
      return;
    }
    case "sethome": {
      await host.control.setHomeChannel(item.address);
      return host.answer(
        item,
        "🏠 This chat is now the home channel: gateway notices will come here.",
      );
    }
    default: {
      const extra = host.extraCommand(command.name);
      if (extra) return host.answer(item, await extra(item, command.args));
      return host.answer(item, TEXT.unknownCommand(command.name));
    }
  }
}

async function retryLast(
  host: ChatCommandHost,
  item: InboxItem,
  active: ActiveTurn | null,
): Promise<void> {
  const session = await host.store.getSession(item.sessionKey);
  // A request held back after a crash loop continues now (its reply answers that request).
  if (session && host.resumeNow(session)) {
    await host.store.closeInboxItem(item.id, "done");
    return;
  }
  const transcript = await host.store.loadTranscript(item.sessionId);
  const lastUser = [...transcript].reverse().find((m) => m.message.role === "user");
  if (lastUser?.message.role !== "user") return host.answer(item, TEXT.nothingToRetry);
  if (active) host.stopTurn(active, "interrupt");
  let request = lastUser.message.content;
  if (session?.suspended) {
    // A suspended session's dropped requests run again on a fresh start, which keeps nothing of
    // the old transcript: every message since its last reply goes, not only the last one.
    request = cutOffRequest(transcript.map((m) => m.message)) ?? request;
    await host.store.resetSession(item.sessionKey);
  }
  await host.store.closeInboxItem(item.id, "done");
  host.retry(item.sessionKey, request, item.address);
}

async function statusText(
  host: ChatCommandHost,
  item: InboxItem,
  active: ActiveTurn | null,
): Promise<string> {
  const session = await host.store.getSession(item.sessionKey);
  const transcript = session ? await host.store.loadTranscript(session.sessionId) : [];
  const lines = [
    `Session: ${session?.sessionId ?? "(new)"}`,
    `Messages: ${transcript.length}`,
    active
      ? `Working for ${Math.round((Date.now() - active.startedAt) / 1000)}s${active.currentTool ? ` (running ${active.currentTool})` : ""}`
      : "Idle",
  ];
  lines.push(...((await host.modelStatusLines?.(item)) ?? []));
  if (host.draining()) lines.push("Gateway: draining for maintenance");
  if (host.admission() !== "open") lines.push(`Gateway: ${host.admission()}`);
  lines.push(...host.statusLines());
  return lines.join("\n");
}
