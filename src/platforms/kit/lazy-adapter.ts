/**
 * A platform adapter behind a dynamic import: its SDKs (grammY, the Discord and Slack clients)
 * are loaded only when the gateway starts that platform. Until then the platform reports
 * `starting`, replies stay queued, and live calls (typing, progress, card updates) do nothing.
 * Each platform names its module and the optional calls it answers; nothing else is its own.
 */
import type {
  ChatAddress,
  ConnectionReport,
  InboundAttachment,
  InboundSink,
  OutboundReply,
  PlatformAdapter,
  PlatformStatus,
  ProgressUpdate,
} from "../../contract/platform.js";

/** The optional calls of the contract a lazy adapter passes on, when its platform has them. */
export type LazyCall = "showTyping" | "fetchFile" | "approvalAnswered";

export interface LazyAdapterSpec<Options> {
  /** The platform's name (`ChatAddress.platform`). */
  name: string;
  /** How people call it in an error ("Telegram is not started yet"). */
  label: string;
  /** Imports the adapter's module and builds the adapter. */
  load(options: Options): Promise<PlatformAdapter>;
  /** The optional calls the platform answers; the others stay absent, as on the adapter. */
  calls: readonly LazyCall[];
}

/** A class for `spec`'s platform: `new Lazy(options)` is the adapter the gateway holds. */
export function lazyAdapter<Options>(
  spec: LazyAdapterSpec<Options>,
): new (
  options: Options,
) => PlatformAdapter {
  return class extends LazyAdapter<Options> {
    constructor(options: Options) {
      super(spec, options);
    }
  };
}

class LazyAdapter<Options> implements PlatformAdapter {
  readonly name: string;
  private adapter: PlatformAdapter | null = null;
  showTyping?: (address: ChatAddress) => () => void;
  fetchFile?: (a: InboundAttachment, maxBytes: number, signal: AbortSignal) => Promise<Buffer>;
  approvalAnswered?: (approvalId: string, text: string, address: ChatAddress) => Promise<void>;

  constructor(
    private readonly spec: LazyAdapterSpec<Options>,
    private readonly options: Options,
  ) {
    this.name = spec.name;
    // Only the calls the platform has: the gateway reads an absent one as "not offered".
    if (spec.calls.includes("showTyping")) {
      this.showTyping = (address) => this.adapter?.showTyping?.(address) ?? (() => {});
    }
    if (spec.calls.includes("fetchFile")) {
      this.fetchFile = async (attachment, maxBytes, signal) => {
        const fetchFile = this.adapter?.fetchFile;
        if (!this.adapter || !fetchFile) throw new Error(`${spec.label} is not started yet.`);
        return fetchFile.call(this.adapter, attachment, maxBytes, signal);
      };
    }
    if (spec.calls.includes("approvalAnswered")) {
      this.approvalAnswered = async (approvalId, text, address) => {
        await this.adapter?.approvalAnswered?.(approvalId, text, address);
      };
    }
  }

  async start(sink: InboundSink): Promise<void> {
    this.adapter = await this.spec.load(this.options);
    await this.adapter.start(sink);
  }

  async stop(): Promise<void> {
    await this.adapter?.stop();
  }

  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.adapter)
      throw new Error(`${this.spec.label} is not started yet; the reply stays queued.`);
    await this.adapter.deliver(reply);
  }

  progress(update: ProgressUpdate): void {
    this.adapter?.progress?.(update);
  }

  status(): PlatformStatus {
    return this.adapter?.status() ?? { state: "starting", error: null };
  }

  connection(): ConnectionReport {
    return this.adapter?.connection?.() ?? { state: "reconnecting", lastEventAt: null };
  }
}
