/**
 * Keel's slash commands on Discord: registered once per process, and each invocation stored like
 * the typed command before Discord is answered (commands.ts has the commands themselves).
 */
import type { REST } from "@discordjs/rest";
import { InteractionResponseType, MessageFlags, Routes } from "discord-api-types/v10";
import type { Logger } from "pino";
import type { InboundSink } from "../../contract/platform.js";
import type { ChatAccess } from "../chat-access.js";
import type { DiscordChannels } from "./channels.js";
import { DISCORD_COMMANDS, type SlashCommand } from "./commands.js";
import { discordDmSessionKey, discordThreadSessionKey, THREAD_CHANNEL_TYPES } from "./inbound.js";
import type { DiscordStore } from "./options.js";
import { describeDiscordError } from "./send.js";

/** What the slash commands need of the adapter. */
export interface SlashCommandHost {
  rest: REST;
  logger: Logger;
  access: ChatAccess;
  store: DiscordStore;
  channels: DiscordChannels;
  sink(): InboundSink | null;
}

export class DiscordSlashCommands {
  private commandsRegistered = false;

  constructor(private readonly host: SlashCommandHost) {}

  /** Registers the slash commands once per process; a failure leaves the typed commands. */
  async register(applicationId: string): Promise<void> {
    if (this.commandsRegistered) return;
    this.commandsRegistered = true;
    try {
      await this.host.rest.put(Routes.applicationCommands(applicationId), {
        body: DISCORD_COMMANDS,
      });
    } catch (err) {
      this.commandsRegistered = false;
      this.host.logger.warn(
        { error: describeDiscordError(err) },
        "discord slash commands not registered",
      );
    }
  }

  /**
   * A slash command: stored like the typed command (in a DM, or in a thread, whose session it
   * acts on), then acknowledged to Discord with a note only the user sees; the command's answer
   * comes as a message in the channel. In a plain channel there is no conversation to act on.
   */
  async take(command: SlashCommand): Promise<void> {
    const sink = this.host.sink();
    if (!sink) return;
    const allowed = await this.host.access.isAllowed(command.userId);
    let sessionKey: string | null = null;
    if (command.guildId === undefined) sessionKey = discordDmSessionKey(command.userId);
    else {
      const ours =
        (await this.host.store.getSession(discordThreadSessionKey(command.channelId))) !== null;
      const info = ours ? { type: 11 } : await this.host.channels.info(command.channelId);
      if (THREAD_CHANNEL_TYPES.has(info.type))
        sessionKey = discordThreadSessionKey(command.channelId);
    }
    if (allowed && sessionKey) {
      await sink.receive({
        platform: "discord",
        chatId: command.channelId,
        platformMessageId: command.interactionId,
        sessionKey,
        text: command.text,
        senderId: command.userId,
        ...(command.userName !== undefined && { senderName: command.userName }),
        address: { platform: "discord", chatId: command.channelId },
        ...(this.host.access.isOperator(command.userId) && { operator: true }),
      });
    }
    const note = !allowed
      ? "I don't know you yet: send me a direct message to get a pairing code."
      : sessionKey
        ? `${command.text} received.`
        : "Use my commands in a direct message or in one of my threads.";
    try {
      await this.host.rest.post(Routes.interactionCallback(command.interactionId, command.token), {
        body: {
          type: InteractionResponseType.ChannelMessageWithSource,
          data: { content: note, flags: MessageFlags.Ephemeral },
        },
        auth: false,
      });
    } catch (err) {
      // An interaction replayed after a restart has expired; its command is stored all the same.
      this.host.logger.debug(
        { error: describeDiscordError(err) },
        "discord interaction not acknowledged",
      );
    }
  }
}
