/**
 * The catch-up over REST after a lost session: `GET /channels/:id/messages?after=` from the last
 * stored message of each recently active channel (and the free channels), taken like live
 * messages; one left unfinished is finished on the next connection.
 */
import { DiscordAPIError, type REST } from "@discordjs/rest";
import { type APIMessage, Routes } from "discord-api-types/v10";
import type { Logger } from "pino";
import type { InboundMessage } from "../../contract/platform.js";
import type { DiscordStore, DiscordTiming } from "./options.js";
import { describeDiscordError } from "./send.js";
import { compareSnowflakes, snowflakeAt } from "./snowflake.js";

type GuildMessage = APIMessage & { guild_id?: string };

/** What the catch-up needs of the adapter. */
export interface CatchUpHost {
  store: DiscordStore;
  timing: DiscordTiming;
  freeChannels: ReadonlySet<string>;
  logger: Logger;
  rest: REST;
  channelInfo(channelId: string): Promise<{ type: number; guildId?: string }>;
  toInbound(message: GuildMessage, backlog: boolean): Promise<InboundMessage | null>;
  receiveTogether(messages: InboundMessage[]): Promise<void>;
}

export class DiscordCatchUp {
  /** A catch-up that could not finish: from when it reads (the lost session's last event). */
  private catchUpFrom: number | null = null;

  constructor(private readonly host: CatchUpHost) {}

  /** Runs the catch-up a lost session (or an unfinished earlier catch-up) calls for. */
  async catchUpIfNeeded(lostAt: number | null): Promise<void> {
    const from = lostAt ?? this.catchUpFrom;
    this.catchUpFrom = null;
    if (from !== null) await this.catchUp(from);
  }

  /**
   * After a session was lost: reads what each recently active channel (and each free channel)
   * received since its last stored message and takes it like a live message. Overlap with
   * what was stored is harmless (the inbox is unique per message).
   */
  private async catchUp(lostAt: number): Promise<void> {
    const since = Date.now() - this.host.timing.catchUpWindowMs;
    const from = new Map<string, string>();
    for (const chat of await this.host.store.listRecentChats("discord", since)) {
      from.set(chat.chatId, chat.lastMessageId);
    }
    for (const channel of this.host.freeChannels) {
      if (!from.has(channel)) from.set(channel, snowflakeAt(lostAt));
    }
    this.host.logger.info(
      { channels: from.size },
      "discord session was lost: catching up over REST",
    );
    let taken = 0;
    let incomplete = false;
    for (const [channelId, after] of from) {
      try {
        taken += await this.catchUpChannel(channelId, after);
      } catch (err) {
        // Discord refusing a channel (access gone) will not change; anything else (a 5xx, the
        // network, a message that could not be stored) is tried again.
        const refused = err instanceof DiscordAPIError && err.status < 500 && err.status !== 429;
        if (!refused) incomplete = true;
        this.host.logger.warn(
          { channel: channelId, error: describeDiscordError(err), retry: !refused },
          "discord catch-up of a channel failed",
        );
      }
    }
    this.host.logger.info({ messages: taken }, "discord catch-up done");
    if (incomplete) {
      // Finished on the next connection, which the failure below makes the adapter build.
      this.catchUpFrom = lostAt;
      throw new Error("the catch-up over REST is incomplete");
    }
  }

  private async catchUpChannel(channelId: string, after: string): Promise<number> {
    const info = await this.host.channelInfo(channelId);
    let cursor = after;
    let taken = 0;
    for (let page = 0; page < this.host.timing.catchUpMaxPages; page++) {
      const batch = (await this.host.rest.get(Routes.channelMessages(channelId), {
        query: new URLSearchParams({ after: cursor, limit: "100" }),
      })) as GuildMessage[];
      batch.sort((a, b) => compareSnowflakes(a.id, b.id));
      const inbound: InboundMessage[] = [];
      for (const message of batch) {
        // REST messages carry no guild id; the channel says whether it is a DM.
        if (info.guildId !== undefined) message.guild_id = info.guildId;
        else delete message.guild_id;
        const taken = await this.host.toInbound(message, true);
        if (taken) inbound.push(taken);
      }
      // Handed over together: a chat's missed messages are one turn (InboundSink.receiveAll).
      await this.host.receiveTogether(inbound);
      taken += batch.length;
      if (batch.length < 100) break;
      cursor = batch.at(-1)!.id;
    }
    return taken;
  }
}
