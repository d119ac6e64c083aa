/** The Discord adapter's options, timing and the close codes reconnecting cannot help. */
import { GatewayIntentBits } from "discord-api-types/v10";
import type { PairingStore, PlatformDataStore, SessionStore } from "../../sessions/store.js";
import type { AdapterTiming, LeasedAdapterOptions } from "../kit/connection-state.js";
import type { DiscordProgressSettings } from "./progress.js";

/** What the adapter needs of the store: pairing, its gateway state, sessions and catch-up cursors. */
export type DiscordStore = PairingStore & PlatformDataStore & SessionStore;

/** Guild and DM messages with their text; Message Content is privileged (docs/operations.md). */
export const DISCORD_INTENTS =
  GatewayIntentBits.Guilds |
  GatewayIntentBits.GuildMessages |
  GatewayIntentBits.DirectMessages |
  GatewayIntentBits.MessageContent;

export interface DiscordTiming extends AdapterTiming {
  /** Rebuild the connection when no heartbeat ACK and no event arrived for this long. */
  deafAfterMs: number;
  watchdogCheckMs: number;
  /** Identify spacing (doubles within a burst) and the daily cap, below Discord's 1000. */
  identifySpacingMs: number;
  identifyMaxSpacingMs: number;
  maxIdentifiesPerDay: number;
  /** Channels with a stored message this recent are caught up after a lost session. */
  catchUpWindowMs: number;
  /** Pages of 100 messages read per channel in a catch-up. */
  catchUpMaxPages: number;
  /** REST request timeout. */
  restTimeoutMs: number;
}

export const DEFAULT_DISCORD_TIMING: DiscordTiming = {
  deafAfterMs: 120_000,
  watchdogCheckMs: 10_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  typingIntervalMs: 8_000,
  typingDelayMs: 1_000,
  stopTimeoutMs: 3_000,
  startWaitMs: 10_000,
  identifySpacingMs: 5_000,
  identifyMaxSpacingMs: 600_000,
  maxIdentifiesPerDay: 900,
  catchUpWindowMs: 7 * 86_400_000,
  catchUpMaxPages: 10,
  restTimeoutMs: 15_000,
};

/** `connection`: this one keeps the gateway connection only while it holds the bot's lease. */
export interface DiscordAdapterOptions extends LeasedAdapterOptions<DiscordProgressSettings> {
  token: string;
  /** REST base, e.g. https://discord.com/api (the gateway URL comes from /v10/gateway/bot). */
  apiRoot: string;
  allowedUsers: readonly string[];
  adminUsers: readonly string[];
  freeChannels: readonly string[];
  store: DiscordStore;
  timing?: Partial<DiscordTiming>;
}

/** Close codes after which reconnecting cannot help (https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes). */
export const FATAL_CLOSES: Record<number, string> = {
  4004: "Discord rejected the bot token (close 4004). Check platforms.discord.token (DISCORD_BOT_TOKEN) and restart Keel.",
  4013: "Discord rejected the gateway intents (close 4013).",
  4014: "Discord refused the Message Content intent (close 4014): enable it for the bot in the Developer Portal (Bot → Privileged Gateway Intents) and restart Keel.",
};
export const UNAUTHORIZED_TEXT =
  "Discord rejected the bot token (401 Unauthorized). Check platforms.discord.token (DISCORD_BOT_TOKEN) and restart Keel.";
