/**
 * The Slack adapter behind a dynamic import: the Slack SDKs are only loaded when the gateway
 * actually starts Slack. Until then the platform reports `starting`.
 */
import type {
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
  ProgressUpdate,
} from "../platform.js";
import type { SlackAdapter, SlackAdapterOptions } from "./adapter.js";

export class LazySlackAdapter implements PlatformAdapter {
  readonly name = "slack";
  private adapter: SlackAdapter | null = null;

  constructor(private readonly options: SlackAdapterOptions) {}

  async start(sink: InboundSink): Promise<void> {
    const { SlackAdapter } = await import("./adapter.js");
    this.adapter = new SlackAdapter(this.options);
    await this.adapter.start(sink);
  }

  async stop(): Promise<void> {
    await this.adapter?.stop();
  }

  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.adapter) throw new Error("Slack is not started yet; the reply stays queued.");
    await this.adapter.deliver(reply);
  }

  progress(update: ProgressUpdate): void {
    this.adapter?.progress(update);
  }

  status(): PlatformStatus {
    return this.adapter?.status() ?? { state: "starting", error: null };
  }
}
