/**
 * Slack behind a dynamic import (platforms/kit/lazy-adapter.ts): the Slack SDKs are only loaded
 * when the gateway actually starts Slack.
 */
import { lazyAdapter } from "../kit/lazy-adapter.js";
import type { SlackAdapterOptions } from "./adapter.js";

export const LazySlackAdapter = lazyAdapter<SlackAdapterOptions>({
  name: "slack",
  label: "Slack",
  load: async (options) => new (await import("./adapter.js")).SlackAdapter(options),
  calls: [],
});
