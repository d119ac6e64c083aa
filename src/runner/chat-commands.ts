/** Chat commands (`/new`, `/stop`, ...): they act at once and are never queued as text. */
import type { ChatAddress } from "../platforms/platform.js";
import type { InboxItem, Store } from "../sessions/store.js";
import type { AbortCause, ActiveTurn } from "./lane.js";
import type { Admission, GatewayControl } from "./runner.js";
import { TEXT } from "./texts.js";

export interface ChatCommand {
  name: string;
  args: string;
}

/** The slice of the runner a command may use. */
export interface ChatCommandHost {
  store: Store;
  control: GatewayControl;
  laneOf(sessionKey: string): ActiveTurn | null;
  stopTurn(active: ActiveTurn, cause: AbortCause): void;
  retry(sessionKey: string, text: string, address: ChatAddress): void;
  answer(item: InboxItem, text: string): Promise<void>;
  /** Answers with the refusal a message gets while the gateway stops or drains. */
  refuse(item: InboxItem): Promise<void>;
  admission(): Admission;
  draining(): boolean;
}

/** `/name args` (a Telegram `/name@bot` suffix is ignored); null for ordinary text. */
export function parseChatCommand(text: string): ChatCommand | null {
  const match = /^\/([A-Za-z][A-Za-z0-9_]*)(?:@\S+)?(?:\s+([\s\S]*))?$/.exec(text.trim());
  if (!match) return null;
  return { name: match[1]!.toLowerCase(), args: (match[2] ?? "").trim() };
}

export async function handleChatCommand(
  host: ChatCommandHost,
  item: InboxItem,
  command: ChatCommand,
): Promise<void> {
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
    default:
      return host.answer(item, TEXT.unknownCommand(command.name));
  }
}

async function retryLast(
  host: ChatCommandHost,
  item: InboxItem,
  active: ActiveTurn | null,
): Promise<void> {
  const transcript = await host.store.loadTranscript(item.sessionId);
  const lastUser = [...transcript].reverse().find((m) => m.message.role === "user");
  if (lastUser?.message.role !== "user") return host.answer(item, TEXT.nothingToRetry);
  if (active) host.stopTurn(active, "interrupt");
  await host.store.closeInboxItem(item.id, "done");
  host.retry(item.sessionKey, lastUser.message.content, item.address);
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
  if (host.draining()) lines.push("Gateway: draining for maintenance");
  if (host.admission() !== "open") lines.push(`Gateway: ${host.admission()}`);
  return lines.join("\n");
}
