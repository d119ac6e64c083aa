/**
 * Server-sent events to one `/v1` client, with a cap on what may wait for it. The turn produces
 * text as fast as the model sends it; a client that stops reading leaves every chunk queued in the
 * gateway (the stream's queue, then the socket's buffer). Once more than `maxBufferedBytes` wait,
 * the client is cut off: its connection is destroyed and nothing more is queued for it. The turn
 * is not touched: it finishes, and its reply stays in the session, where a retry with the same
 * `Idempotency-Key` (or the transcript) finds it.
 *
 * Text is coalesced while the client lags: a text delta sent while an earlier write has not yet
 * gone on to the socket is not queued as an event of its own but appended to one pending text,
 * which goes out as a single event once every write before it has settled (or as soon as any
 * other event is sent, so the order holds). A client that keeps up gets every delta as it came;
 * one that lags gets fewer, longer deltas, and what waits for it is its text, not an envelope of
 * some 200 bytes around every few characters of it.
 */
import type { ServerResponse } from "node:http";
import type { SSEStreamingApi } from "hono/streaming";

/** One server-sent event: its `data:` and, as the Responses API names its events, its name. */
export interface SseEvent {
  data: string;
  event?: string;
}

/** Text that waits for the writes before it to settle, and the event it will go out as. */
interface PendingText {
  text: string;
  bytes: number;
  render: (text: string) => SseEvent;
  /** Settles the promises of every `sendText` merged into it. */
  settle: () => void;
  settled: Promise<void>;
}

export class BoundedSse {
  /** Bytes handed to the stream whose write has not yet gone on to the socket. */
  private queuedBytes = 0;
  /** Writes handed to the stream that have not yet settled. */
  private unsettled = 0;
  private pending: PendingText | null = null;
  private cut = false;

  /**
   * @param outgoing Node's response for the request (absent in `app.request()` tests: then only
   *   the stream's own queue counts).
   * @param onCutOff called once, when the client is cut off.
   */
  constructor(
    private readonly out: SSEStreamingApi,
    private readonly outgoing: ServerResponse | undefined,
    private readonly maxBufferedBytes: number,
    private readonly onCutOff: (bufferedBytes: number) => void,
  ) {}

  /** True once the client was cut off (later sends are dropped). */
  get cutOff(): boolean {
    return this.cut;
  }

  /**
   * Queues one `data:` event (named `event`, as the Responses API names its events), after any
   * pending text; resolves once it went on to the socket (or was dropped).
   */
  send(data: string, event?: string): Promise<void> {
    this.flushText();
    return this.write(event ? { data, event } : { data });
  }

  /**
   * A piece of text, as the event `render` makes of it. While an earlier write has not settled,
   * it is appended to the pending text (rendered once, with all of it, when it goes out);
   * `render` is the stream's one function for its text events, whose pieces concatenate.
   */
  sendText(text: string, render: (text: string) => SseEvent): Promise<void> {
    if (this.cut) return Promise.resolve();
    if (this.pending && this.pending.render !== render) this.flushText();
    if (!this.pending && this.unsettled === 0) return this.write(render(text));
    if (!this.pending) {
      let settle = () => {};
      const settled = new Promise<void>((resolve) => {
        settle = resolve;
      });
      this.pending = { text: "", bytes: 0, render, settle, settled };
    }
    const pending = this.pending;
    pending.text += text;
    pending.bytes += Buffer.byteLength(text);
    this.checkCap();
    return pending.settled;
  }

  /**
   * The pending text goes out now, as one event (rendered now: a stream that numbers its events
   * flushes before it makes the next one).
   */
  flushText(): void {
    const pending = this.pending;
    if (!pending) return;
    this.pending = null;
    void this.write(pending.render(pending.text)).then(pending.settle);
  }

  private write(message: SseEvent): Promise<void> {
    if (this.cut) return Promise.resolve();
    // "data: " and the blank line around each line of it; exact enough for a cap.
    const bytes =
      Buffer.byteLength(message.data) + 8 + (message.event ? message.event.length + 8 : 0);
    this.queuedBytes += bytes;
    this.unsettled += 1;
    const written = this.out.writeSSE(message).finally(() => {
      this.queuedBytes -= bytes;
      this.unsettled -= 1;
      // Every write before it is on its way: the text merged meanwhile follows as one event.
      if (this.unsettled === 0) this.flushText();
    });
    this.checkCap();
    return written;
  }

  /** Cuts the client off once more than the cap waits for it. */
  private checkCap(): void {
    if (this.cut) return;
    const buffered =
      this.queuedBytes + (this.pending?.bytes ?? 0) + (this.outgoing?.writableLength ?? 0);
    if (buffered > this.maxBufferedBytes) this.cutOffClient(buffered);
  }

  private cutOffClient(buffered: number): void {
    this.cut = true;
    this.pending?.settle();
    this.pending = null;
    this.onCutOff(buffered);
    // Destroying the response closes the socket; the stream's queue is then cancelled, which
    // settles the writes still waiting in it.
    if (this.outgoing) this.outgoing.destroy();
    else this.out.abort();
  }
}
