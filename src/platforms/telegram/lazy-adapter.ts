/**
 * Telegram behind a dynamic import (platforms/kit/lazy-adapter.ts): grammY (about 140 ms and
 * 20 MB to load) is only loaded when the gateway actually starts Telegram.
 */
import { lazyAdapter } from "../kit/lazy-adapter.js";
import type { TelegramAdapterOptions } from "./adapter.js";

export const LazyTelegramAdapter = lazyAdapter<TelegramAdapterOptions>({
  name: "telegram",
  label: "Telegram",
  load: async (options) => new (await import("./adapter.js")).TelegramAdapter(options),
  calls: ["showTyping", "fetchFile", "approvalAnswered"],
});
