/**
 * Keel's chat commands as Discord slash commands. Registered globally when the bot connects (a
 * bulk overwrite, so registering again changes nothing); an invocation becomes the same text
 * command a user could type (`/status`), stored in the inbox before Discord is answered.
 */
import type { APIInteraction, RESTPutAPIApplicationCommandsJSONBody } from "discord-api-types/v10";
import { ApplicationCommandType, InteractionType } from "discord-api-types/v10";
import { commandMenu } from "../kit/command-menu.js";

/** Discord's slash commands do not include `/approve` and `/deny`. */
export const DISCORD_COMMANDS: RESTPutAPIApplicationCommandsJSONBody = commandMenu({
  place: "channel",
  approvals: false,
}).map((c) => ({ ...c, type: ApplicationCommandType.ChatInput }));

const NAMES = new Set(DISCORD_COMMANDS.map((c) => c.name));

/** A slash command invocation: who, where, and the text command it stands for. */
export interface SlashCommand {
  interactionId: string;
  token: string;
  userId: string;
  userName: string | undefined;
  channelId: string;
  guildId: string | undefined;
  text: string;
}

/** The command in an interaction, or null when it is not one of Keel's slash commands. */
export function slashCommandOf(interaction: APIInteraction): SlashCommand | null {
  if (interaction.type !== InteractionType.ApplicationCommand) return null;
  const name = interaction.data.name;
  const user = interaction.member?.user ?? interaction.user;
  const channelId = interaction.channel?.id ?? (interaction as { channel_id?: string }).channel_id;
  if (!NAMES.has(name) || !user || !channelId) return null;
  return {
    interactionId: interaction.id,
    token: interaction.token,
    userId: user.id,
    userName: user.global_name || user.username || undefined,
    channelId,
    guildId: interaction.guild_id,
    text: `/${name}`,
  };
}
