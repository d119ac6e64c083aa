/**
 * The Discord adapter behind a dynamic import: @discordjs/ws and @discordjs/rest are only loaded
 * when the gateway actually starts Discord. Until then the platform reports `starting`.
 */
import type {
  ChatAddress,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
  ProgressUpdate,
} from "../platform.js";
import type { DiscordAdapter, DiscordAdapterOptions } from "./adapter.js";

export class LazyDiscordAdapter implements PlatformAdapter {
  readonly name = "discord";
  private adapter: DiscordAdapter | null = null;

  constructor(private readonly options: DiscordAdapterOptions) {}

  async start(sink: InboundSink): Promise<void> {
    const { DiscordAdapter } = await import("./adapter.js");
    this.adapter = new DiscordAdapter(this.options);
    await this.adapter.start(sink);
  }

  async stop(): Promise<void> {
    await this.adapter?.stop();
  }

  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.adapter) throw new Error("Discord is not started yet; the reply stays queued.");
    await this.adapter.deliver(reply);
  }

  showTyping(address: ChatAddress): () => void {
    return this.adapter?.showTyping(address) ?? (() => {});
  }

  progress(update: ProgressUpdate): void {
    this.adapter?.progress(update);
  }

  status(): PlatformStatus {
    return this.adapter?.status() ?? { state: "starting", error: null };
  }
}
