/**
 * Discord message to InboundMessage: which messages Keel answers and in which session. Pure; the
 * adapter supplies what it knows about the channel and decides access.
 *
 * - A DM (no guild): session `agent:main:discord:dm:<user>`, replies in the DM.
 * - A thread: session `agent:main:discord:thread:<thread id>`; answered when the bot is
 *   mentioned, the thread is one of Keel's (its session exists), or it (or its parent) is a free
 *   channel.
 * - Any other guild channel: answered when the bot is mentioned or the channel is free; each
 *   such message starts a conversation in a new thread on that message. A thread started from a
 *   message takes the message's id, so the session key `thread:<message id>` is known before the
 *   thread exists, and the thread is created when the first reply is delivered.
 */
import type { APIMessage } from "discord-api-types/v10";
import { MessageType } from "discord-api-types/v10";
import type { ChatAddress, InboundMessage } from "../../contract/platform.js";

/** Thread channel types (announcement, public and private threads). */
export const THREAD_CHANNEL_TYPES: ReadonlySet<number> = new Set([10, 11, 12]);

export function discordDmSessionKey(userId: string): string {
  return `agent:main:discord:dm:${userId}`;
}

export function discordThreadSessionKey(threadId: string): string {
  return `agent:main:discord:thread:${threadId}`;
}

/** What the adapter knows about the channel a guild message was posted in. */
export interface ChannelFacts {
  isThread: boolean;
  /** The thread's parent channel (threads only). */
  parentId?: string;
  /** A Keel session already exists for this thread (Keel started it or was addressed in it). */
  hasSession: boolean;
}

export interface IntakeContext {
  botUserId: string;
  freeChannels: ReadonlySet<string>;
}

/** Drops a leading mention of the bot (`<@id>` or `<@!id>`) and other mentions of it. */
export function stripBotMention(content: string, botUserId: string): string {
  return content.replace(new RegExp(`<@!?${botUserId}>`, "g"), "").trim();
}

function mentionsBot(message: APIMessage, botUserId: string): boolean {
  return (
    message.mentions.some((user) => user.id === botUserId) ||
    new RegExp(`<@!?${botUserId}>`).test(message.content)
  );
}

/** True for messages a user typed (plain or reply), from a human. */
export function isUserMessage(message: APIMessage, botUserId: string): boolean {
  if (message.author.bot || message.author.id === botUserId || message.webhook_id) return false;
  return message.type === MessageType.Default || message.type === MessageType.Reply;
}

/** True for a message in a DM (Discord sends no guild id for those). */
export function isDirectMessage(message: APIMessage & { guild_id?: string }): boolean {
  return message.guild_id === undefined;
}

/**
 * Whether a guild message could be for Keel before anything about its channel is looked up: a
 * mention, a free channel, or a channel that is one of Keel's threads (`knownThread`).
 */
export function mayConcernBot(
  message: APIMessage,
  context: IntakeContext,
  knownThread: boolean,
): boolean {
  return (
    knownThread ||
    mentionsBot(message, context.botUserId) ||
    context.freeChannels.has(message.channel_id)
  );
}

function senderName(message: APIMessage): string | undefined {
  const author = message.author as APIMessage["author"] & { global_name?: string | null };
  return author.global_name || author.username || undefined;
}

/**
 * The InboundMessage for a message Keel answers, or null. `channel` is required for guild
 * messages (null for DMs). The platform message id is the snowflake, unique per channel, so a
 * replayed or backfilled message maps to the same inbox row.
 */
export function toInboundMessage(
  message: APIMessage & { guild_id?: string },
  context: IntakeContext,
  channel: ChannelFacts | null,
): InboundMessage | null {
  if (!isUserMessage(message, context.botUserId)) return null;
  const text = stripBotMention(message.content, context.botUserId);
  if (text === "") return null;
  const base = {
    platform: "discord",
    chatId: message.channel_id,
    platformMessageId: message.id,
    text,
    senderId: message.author.id,
  };
  const name = senderName(message);
  const withName = name === undefined ? base : { ...base, senderName: name };
  if (isDirectMessage(message)) {
    const address: ChatAddress = {
      platform: "discord",
      chatId: message.channel_id,
      replyToMessageId: message.id,
    };
    return { ...withName, sessionKey: discordDmSessionKey(message.author.id), address };
  }
  if (!channel) return null;
  const mentioned = mentionsBot(message, context.botUserId);
  if (channel.isThread) {
    const free =
      context.freeChannels.has(message.channel_id) ||
      (channel.parentId !== undefined && context.freeChannels.has(channel.parentId));
    if (!mentioned && !channel.hasSession && !free) return null;
    const address: ChatAddress = {
      platform: "discord",
      chatId: message.channel_id,
      replyToMessageId: message.id,
    };
    return { ...withName, sessionKey: discordThreadSessionKey(message.channel_id), address };
  }
  if (!mentioned && !context.freeChannels.has(message.channel_id)) return null;
  // A new conversation: its thread is started on this message when the first reply goes out.
  const address: ChatAddress = {
    platform: "discord",
    chatId: message.channel_id,
    threadId: message.id,
    replyToMessageId: message.id,
  };
  return { ...withName, sessionKey: discordThreadSessionKey(message.id), address };
}
