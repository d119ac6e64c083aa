/**
 * Home channels: where gateway-level notices go (the "back online" greeting). Configured per
 * platform (`platforms.telegram.home_channel`) or set from a chat with `/sethome`, which is kept
 * in `.home_channels.json` and wins over the configured one.
 */
import { join } from "node:path";
import type { ChatAddress } from "../contract/platform.js";
import { readJsonFile, writeJsonAtomic } from "../lib/atomic-file.js";

const FILE = ".home_channels.json";

type HomeChannelFile = Record<string, { chat_id: string; thread_id: string | null }>;

async function readFile(home: string): Promise<HomeChannelFile> {
  try {
    const read = await readJsonFile(join(home, FILE));
    return read.kind === "ok" && read.value && typeof read.value === "object"
      ? (read.value as HomeChannelFile)
      : {};
  } catch {
    return {};
  }
}

export async function setHomeChannel(home: string, address: ChatAddress): Promise<void> {
  const current = await readFile(home);
  current[address.platform] = { chat_id: address.chatId, thread_id: address.threadId ?? null };
  await writeJsonAtomic(join(home, FILE), current);
}

/** Home channels per platform: `/sethome` choices first, then configured ones. */
export async function listHomeChannels(
  home: string,
  configured: Record<string, string | undefined>,
): Promise<ChatAddress[]> {
  const stored = await readFile(home);
  const out = new Map<string, ChatAddress>();
  for (const [platform, chatId] of Object.entries(configured)) {
    if (chatId) out.set(platform, { platform, chatId });
  }
  for (const [platform, entry] of Object.entries(stored)) {
    if (!entry || typeof entry.chat_id !== "string") continue;
    out.set(platform, {
      platform,
      chatId: entry.chat_id,
      ...(entry.thread_id && { threadId: entry.thread_id }),
    });
  }
  return [...out.values()];
}
