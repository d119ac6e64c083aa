/**
 * Slack Events API message events to InboundMessage. Pure: the adapter decides access and the
 * mention gate, and hands the result to the sink.
 *
 * One post can arrive twice, as `message` and as `app_mention` (different event ids, the same
 * channel and `ts`), and Slack redelivers an envelope that was not acknowledged. Both map to the
 * same inbox key, platform `slack` + chat (channel id) + message id (`ts`), so the inbox keeps
 * one row and the runner starts one turn.
 */
import type { ChatAddress, InboundMessage } from "../../contract/platform.js";
import { mentions, slackTextToPlain } from "./format.js";

/** The fields of a `message` or `app_mention` event Keel reads. */
export interface SlackMessageEvent {
  type: string;
  subtype?: string;
  channel?: string;
  /** `im`, `mpim`, `channel`, `group` on `message` events; absent on `app_mention`. */
  channel_type?: string;
  user?: string;
  bot_id?: string;
  text?: string;
  ts?: string;
  thread_ts?: string;
  hidden?: boolean;
}

/** Who Keel is on this workspace (from `auth.test`). */
export interface SlackIdentity {
  userId: string;
  botId: string | null;
}

/** A message Keel may take, with what the adapter needs for the gate. */
export interface SlackCandidate {
  inbound: InboundMessage;
  /** A direct message (no mention needed). */
  direct: boolean;
  /** An `app_mention`, or text that mentions the bot. */
  mentioned: boolean;
  /** A reply inside an existing thread (`thread_ts` of another message). */
  threadReply: boolean;
}

/** Subtypes that are still a person writing: a file with a comment, a reply also sent to the channel. */
const TAKEN_SUBTYPES = new Set(["file_share", "thread_broadcast"]);

/** The session key of a direct message (`agent:main:slack:dm:<user>`). */
export function slackDmSessionKey(userId: string): string {
  return `agent:main:slack:dm:${userId}`;
}

/** The session key of a channel thread (`agent:main:slack:thread:<channel>:<thread ts>`). */
export function slackThreadSessionKey(channel: string, threadTs: string): string {
  return `agent:main:slack:thread:${channel}:${threadTs}`;
}

/** True for a direct-message channel (`channel_type` im; `D…` ids when the type is absent). */
function isDirect(event: SlackMessageEvent): boolean {
  if (event.channel_type !== undefined) return event.channel_type === "im";
  return event.channel?.startsWith("D") ?? false;
}

/**
 * Builds the candidate for a message event, or null for what Keel never takes: edits, deletions
 * and other subtypes, hidden events, messages from bots (our own replies included), and events
 * without a user, channel, ts or text.
 *
 * Sessions: a direct message belongs to the user's DM session; in channels each thread is a
 * session keyed by its root `ts` (a top-level message starts one), and the reply goes into that
 * thread. In a DM the reply stays where the message was (in its thread, if it had one).
 */
export function toSlackCandidate(
  event: SlackMessageEvent,
  identity: SlackIdentity,
): SlackCandidate | null {
  if (event.type !== "message" && event.type !== "app_mention") return null;
  if (event.subtype !== undefined && !TAKEN_SUBTYPES.has(event.subtype)) return null;
  if (event.hidden || event.bot_id !== undefined) return null;
  const { channel, user, ts } = event;
  if (!channel || !user || !ts || user === identity.userId) return null;
  const raw = event.text ?? "";
  const text = slackTextToPlain(raw, identity.userId);
  if (text === "") return null;
  const direct = isDirect(event);
  const threadReply = event.thread_ts !== undefined && event.thread_ts !== ts;
  const root = event.thread_ts ?? ts;
  const address: ChatAddress = { platform: "slack", chatId: channel, replyToMessageId: ts };
  if (!direct) address.threadId = root;
  else if (event.thread_ts !== undefined) address.threadId = event.thread_ts;
  return {
    inbound: {
      platform: "slack",
      chatId: channel,
      platformMessageId: ts,
      sessionKey: direct ? slackDmSessionKey(user) : slackThreadSessionKey(channel, root),
      text,
      senderId: user,
      address,
    },
    direct,
    mentioned: event.type === "app_mention" || mentions(raw, identity.userId),
    threadReply,
  };
}
