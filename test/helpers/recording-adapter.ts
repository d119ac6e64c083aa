import type {
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
} from "../../src/contract/platform.js";

/** A platform that records what it was asked to deliver: what the user "saw". */
export class RecordingAdapter implements PlatformAdapter {
  readonly delivered: OutboundReply[] = [];
  sink: InboundSink | null = null;
  failNext = 0;

  constructor(readonly name = "test") {}

  async start(sink: InboundSink): Promise<void> {
    this.sink = sink;
  }
  async stop(): Promise<void> {
    this.sink = null;
  }
  async deliver(reply: OutboundReply): Promise<void> {
    if (this.failNext > 0) {
      this.failNext -= 1;
      throw new Error("platform unavailable");
    }
    this.delivered.push(reply);
  }
  status(): PlatformStatus {
    return { state: this.sink ? "connected" : "stopped", error: null };
  }
  texts(chatId?: string): string[] {
    return this.delivered
      .filter((d) => chatId === undefined || d.address.chatId === chatId)
      .map((d) => d.text);
  }
}
