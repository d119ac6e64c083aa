/**
 * The Telegram adapter behind a dynamic import: grammY (about 140 ms and 20 MB to load) is only
 * loaded when the gateway actually starts Telegram. Until then the platform reports `starting`.
 */
import type {
  ChatAddress,
  InboundAttachment,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
  ProgressUpdate,
} from "../platform.js";
import type { TelegramAdapter, TelegramAdapterOptions } from "./adapter.js";

export class LazyTelegramAdapter implements PlatformAdapter {
  readonly name = "telegram";
  private adapter: TelegramAdapter | null = null;

  constructor(private readonly options: TelegramAdapterOptions) {}

  async start(sink: InboundSink): Promise<void> {
    const { TelegramAdapter } = await import("./adapter.js");
    this.adapter = new TelegramAdapter(this.options);
    await this.adapter.start(sink);
  }

  async stop(): Promise<void> {
    await this.adapter?.stop();
  }

  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.adapter) throw new Error("Telegram is not started yet; the reply stays queued.");
    await this.adapter.deliver(reply);
  }

  async fetchFile(
    attachment: InboundAttachment,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    if (!this.adapter) throw new Error("Telegram is not started yet.");
    return this.adapter.fetchFile(attachment, maxBytes, signal);
  }

  async approvalAnswered(approvalId: string, text: string): Promise<void> {
    await this.adapter?.approvalAnswered(approvalId, text);
  }

  progress(update: ProgressUpdate): void {
    this.adapter?.progress(update);
  }

  showTyping(address: ChatAddress): () => void {
    return this.adapter?.showTyping(address) ?? (() => {});
  }

  status(): PlatformStatus {
    return this.adapter?.status() ?? { state: "starting", error: null };
  }
}
