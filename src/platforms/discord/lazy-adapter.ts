/**
 * Discord behind a dynamic import (platforms/kit/lazy-adapter.ts): @discordjs/ws and
 * @discordjs/rest are only loaded when the gateway actually starts Discord.
 */
import { lazyAdapter } from "../kit/lazy-adapter.js";
import type { DiscordAdapterOptions } from "./options.js";

export const LazyDiscordAdapter = lazyAdapter<DiscordAdapterOptions>({
  name: "discord",
  label: "Discord",
  load: async (options) => new (await import("./adapter.js")).DiscordAdapter(options),
  calls: ["showTyping"],
});
