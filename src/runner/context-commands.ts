/**
 * Chat commands about the conversation's context and models: `/usage`, `/model [name]`,
 * `/compact`, `/memory`, and the model lines of `/status`.
 */

import { createCompactionSink, visibleMessages } from "../context/compaction-record.js";
import type { ModelStack } from "../context/model-stack.js";
import { MemoryFile, memoryUserOf } from "../memory/memory-file.js";
import type { InboxItem, ReportingStore, SessionStore, TurnStore } from "../sessions/store.js";
import { normalizeHistory } from "./history.js";
import type { ExtraChatCommand } from "./runner.js";

export interface ContextCommandDeps {
  store: SessionStore & TurnStore & ReportingStore;
  /** Absent when no model is configured. */
  models: ModelStack | undefined;
  home: string;
  prices: { input_per_mtok: number; output_per_mtok: number } | undefined;
  /** True while a turn of the session runs (its history must not move under it). */
  busy(sessionKey: string): boolean;
}

const NO_MODEL = "No model is configured (model.base_url and model.name).";

export function contextCommands(deps: ContextCommandDeps): Record<string, ExtraChatCommand> {
  return {
    usage: (item) => usageText(deps, item),
    model: (item, args) => modelCommand(deps, item, args),
    compact: (item) => compactCommand(deps, item),
    memory: async (item) => memoryText(deps, item),
  };
}

const n = (value: number) => Math.round(value).toLocaleString("en-US");

async function usageText(deps: ContextCommandDeps, item: InboxItem): Promise<string> {
  const session = await deps.store.getSession(item.sessionKey);
  if (!session) return "No usage yet in this conversation.";
  const totals = await deps.store.sessionUsage(session.sessionId);
  const lines = [
    `Usage of this conversation: ${totals.calls} model calls, ${n(totals.promptTokens)} tokens in, ` +
      `${n(totals.completionTokens)} out` +
      (totals.estimatedCalls > 0
        ? ` (${totals.estimatedCalls} calls estimated: the model reported no usage).`
        : "."),
  ];
  if (deps.models) {
    const window = await deps.models.windowOf(session.model);
    const used = totals.lastPromptTokens;
    lines.push(
      used === null
        ? `Context: empty of ${n(window)} tokens.`
        : `Context: about ${n(used)} of ${n(window)} tokens (${Math.round((used / window) * 100)}%); ` +
            `older messages are summarised past ${Math.round(deps.models.threshold * 100)}%.`,
    );
  }
  const compaction = await deps.store.latestCompaction(session.sessionId);
  if (compaction) lines.push("Older messages of this conversation are summarised (/compact).");
  if (deps.prices) {
    const cost =
      (totals.promptTokens * deps.prices.input_per_mtok +
        totals.completionTokens * deps.prices.output_per_mtok) /
      1_000_000;
    lines.push(`Cost: about ${cost.toFixed(4)} (estimate from model.prices).`);
  }
  return lines.join("\n");
}

async function modelCommand(
  deps: ContextCommandDeps,
  item: InboxItem,
  args: string,
): Promise<string> {
  const models = deps.models;
  if (!models) return NO_MODEL;
  const session = await deps.store.getSession(item.sessionKey);
  const main = models.models[0]!.name;
  const current = models.find(session?.model ?? "")?.name ?? main;
  const wanted = args.trim();
  if (!wanted) {
    const list = models.models.map(
      (m, i) => `${m.name === current ? "▶" : "•"} ${m.name}${i === 0 ? " (main)" : " (fallback)"}`,
    );
    return `Models (▶ this conversation; the others are its fallbacks, in order):\n${list.join("\n")}\nSwitch with /model NAME.`;
  }
  const chosen = models.find(wanted);
  if (!chosen) {
    return `There is no model "${wanted}" in the configuration. Configured: ${models.models.map((m) => m.name).join(", ")}.`;
  }
  await deps.store.setSessionModel(item.sessionKey, chosen.name === main ? null : chosen.name);
  return `This conversation now uses ${chosen.name}.`;
}

async function compactCommand(deps: ContextCommandDeps, item: InboxItem): Promise<string> {
  const models = deps.models;
  if (!models) return NO_MODEL;
  if (deps.busy(item.sessionKey)) {
    return "A turn is running in this conversation: send /compact again once it has answered.";
  }
  const session = await deps.store.getSession(item.sessionKey);
  if (!session) return "Nothing to compact yet.";
  const { compaction, messages } = await deps.store.loadTurnHistory(session.sessionId);
  const history = normalizeHistory(visibleMessages(messages, compaction));
  const keeper = await models.keeper({
    sessionId: session.sessionId,
    summary: compaction?.summary ?? null,
    preferred: session.model,
    sink: createCompactionSink({ store: deps.store, sessionId: session.sessionId, turnId: null }),
  });
  if (history.filter((m) => m.role === "user").length < 2) {
    return "Nothing to compact: this conversation has no older exchanges to summarise.";
  }
  const done = await keeper.compactNow("", history, [], AbortSignal.timeout(10 * 60_000));
  if (!done) {
    return `Nothing was compacted: ${keeper.failure ?? "nothing to summarise"}. The conversation is unchanged.`;
  }
  const saved = done.tokensBefore - done.tokensAfter;
  return (
    `Compacted: ${done.messages} older messages are now a summary. The conversation went from ` +
    `about ${n(done.tokensBefore)} to ${n(done.tokensAfter)} tokens (saved about ${n(saved)}).`
  );
}

function memoryText(deps: ContextCommandDeps, item: InboxItem): string {
  const user = memoryUserOf(item);
  if (!user) {
    return "Memory is kept per user and used only in direct chats: send /memory to me in a private chat.";
  }
  const file = new MemoryFile(deps.home, user);
  const text = file.read().trim();
  return text ? `Your memory (${file.size()} of 4096 bytes):\n${text}` : "Your memory is empty.";
}

/** Lines for `/status`: the model in use and its latest calls. */
export async function modelStatusLines(
  deps: ContextCommandDeps,
  item: InboxItem,
): Promise<string[]> {
  const models = deps.models;
  if (!models) return [];
  const session = await deps.store.getSession(item.sessionKey);
  const current = models.find(session?.model ?? "")?.name ?? models.models[0]!.name;
  const lines = [`Model: ${current}`];
  const attempts = session ? models.attempts(session.sessionId) : [];
  if (attempts.length > 0) {
    const described = attempts.slice(-4).map((a) => {
      const what = a.outcome === "ok" ? "ok" : a.status ? `HTTP ${a.status}` : a.outcome;
      const next =
        a.nextModel !== undefined
          ? ` → ${a.nextModel}`
          : a.nextInMs !== undefined
            ? ` → retry in ${(a.nextInMs / 1000).toFixed(1)} s`
            : "";
      return `${a.model} #${a.attempt}: ${what}${next}`;
    });
    lines.push(`Latest model calls: ${described.join("; ")}`);
  }
  return lines;
}
