/** What Keel knows of Discord channels: their type, parent and guild, from events or REST. */
import { DiscordAPIError, type REST } from "@discordjs/rest";
import { type APIChannel, Routes } from "discord-api-types/v10";
import type { Logger } from "pino";
import { THREAD_CHANNEL_TYPES } from "./inbound.js";
import { type DiscordSender, describeDiscordError } from "./send.js";

export interface ChannelInfo {
  type: number;
  parentId?: string;
  guildId?: string;
}

export class DiscordChannels {
  private readonly channels = new Map<string, ChannelInfo>();

  constructor(
    private readonly rest: REST,
    private readonly sender: DiscordSender,
    private readonly logger: Logger,
  ) {}

  /** What is known of a channel, without asking. */
  known(channelId: string): ChannelInfo | undefined {
    return this.channels.get(channelId);
  }

  note(channel: APIChannel, guildId?: string): void {
    const c = channel as APIChannel & { parent_id?: string | null; guild_id?: string };
    const facts: ChannelInfo = { type: c.type };
    if (c.parent_id) facts.parentId = c.parent_id;
    const guild = c.guild_id ?? guildId;
    if (guild) facts.guildId = guild;
    this.channels.set(c.id, facts);
    if (THREAD_CHANNEL_TYPES.has(c.type)) this.sender.noteThread(c.id);
  }

  /** What kind of channel this is: from the gateway's events, or asked once over REST. */
  async info(channelId: string): Promise<ChannelInfo> {
    const known = this.channels.get(channelId);
    if (known) return known;
    try {
      const channel = (await this.rest.get(Routes.channel(channelId))) as APIChannel;
      this.note(channel);
      return this.channels.get(channelId)!;
    } catch (err) {
      // A refusal will not change on a replay: take it as a plain channel rather than stall
      // intake on it. Anything else (5xx, network) is retried through the replay.
      if (!(err instanceof DiscordAPIError) || err.status >= 500 || err.status === 429) throw err;
      this.logger.warn(
        { channel: channelId, error: describeDiscordError(err) },
        "discord channel unknown",
      );
      return { type: 0 };
    }
  }
}
