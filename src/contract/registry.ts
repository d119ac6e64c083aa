/**
 * The gateway's platforms by name: the one answer to "which adapter serves this address", and the
 * live calls the runner, approvals, media and the stop make through it. A call for a platform
 * that is not here, or does not offer the call, does nothing (or says so, for a file fetch).
 */
import type {
  ChatAddress,
  ConnectionReport,
  InboundAttachment,
  PlatformAdapter,
  ProgressUpdate,
} from "./platform.js";

export class PlatformRegistry {
  private readonly byName = new Map<string, PlatformAdapter>();
  private readonly ordered: PlatformAdapter[] = [];

  constructor(adapters: Iterable<PlatformAdapter> = []) {
    for (const adapter of adapters) this.add(adapter);
  }

  /** Adds an adapter; two with one name is a wiring mistake, refused. */
  add(adapter: PlatformAdapter): void {
    if (this.byName.has(adapter.name)) {
      throw new Error(`two platform adapters are named "${adapter.name}"`);
    }
    this.byName.set(adapter.name, adapter);
    this.ordered.push(adapter);
  }

  /** Every adapter, in the order added (the order they start in). */
  all(): readonly PlatformAdapter[] {
    return this.ordered;
  }

  named(platform: string): PlatformAdapter | undefined {
    return this.byName.get(platform);
  }

  forAddress(address: ChatAddress): PlatformAdapter | undefined {
    return this.byName.get(address.platform);
  }

  /** Typing in the chat until the returned function is called; nothing where not offered. */
  showTyping(address: ChatAddress): () => void {
    return this.forAddress(address)?.showTyping?.(address) ?? (() => {});
  }

  repliesInBand(address: ChatAddress): boolean {
    return this.forAddress(address)?.repliesInBand === true;
  }

  progress(update: ProgressUpdate): void {
    this.forAddress(update.address)?.progress?.(update);
  }

  async approvalAnswered(address: ChatAddress, approvalId: string, text: string): Promise<void> {
    await this.forAddress(address)?.approvalAnswered?.(approvalId, text, address);
  }

  /**
   * Each platform's connection health, for status pages and alerts. A platform without a
   * connection of its own (the API, the web chat) reads from its status, with no last event.
   */
  connections(): Record<string, ConnectionReport> {
    return Object.fromEntries(
      this.ordered.map((adapter) => [adapter.name, adapter.connection?.() ?? fromStatus(adapter)]),
    );
  }

  fetchFile(
    platform: string,
    attachment: InboundAttachment,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    const adapter = this.named(platform);
    if (!adapter?.fetchFile) {
      return Promise.reject(new Error(`the ${platform} platform cannot fetch files`));
    }
    return adapter.fetchFile(attachment, maxBytes, signal);
  }
}

const HEALTH_OF_STATE = {
  starting: "reconnecting",
  connected: "connected",
  error: "reconnecting",
  stopped: "disabled",
} as const;

function fromStatus(adapter: PlatformAdapter): ConnectionReport {
  return { state: HEALTH_OF_STATE[adapter.status().state], lastEventAt: null };
}
