/** An adapter's inbound sink that commits to a store, as the runner does, and lists what it took. */
import type { AcceptResult, InboundMessage, InboundSink } from "../../src/contract/platform.js";
import type { Store } from "../../src/sessions/store.js";

export class StoreSink implements InboundSink {
  readonly accepted: string[] = [];
  constructor(private readonly store: Store) {}
  async receive(message: InboundMessage): Promise<AcceptResult> {
    const result = await this.store.acceptInbound(message);
    if (result.accepted) this.accepted.push(message.text);
    return { accepted: result.accepted, inboxId: result.item.id, sessionId: result.item.sessionId };
  }
}
