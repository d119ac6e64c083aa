/**
 * Server-sent events to one `/v1` client, with a cap on what may wait for it. The turn produces
 * text as fast as the model sends it; a client that stops reading leaves every chunk queued in the
 * gateway (the stream's queue, then the socket's buffer). Once more than `maxBufferedBytes` wait,
 * the client is cut off: its connection is destroyed and nothing more is queued for it. The turn
 * is not touched: it finishes, and its reply stays in the session, where a retry with the same
 * `Idempotency-Key` (or the transcript) finds it.
 */
import type { ServerResponse } from "node:http";
import type { SSEStreamingApi } from "hono/streaming";

export class BoundedSse {
  /** Bytes handed to the stream whose write has not yet gone on to the socket. */
  private queuedBytes = 0;
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
   * Queues one `data:` event (named `event`, as the Responses API names its events); resolves
   * once it went on to the socket (or was dropped).
   */
  send(data: string, event?: string): Promise<void> {
    if (this.cut) return Promise.resolve();
    // "data: " and the blank line around each line of it; exact enough for a cap.
    const bytes = Buffer.byteLength(data) + 8 + (event ? event.length + 8 : 0);
    this.queuedBytes += bytes;
    const written = this.out.writeSSE(event ? { data, event } : { data }).finally(() => {
      this.queuedBytes -= bytes;
    });
    const buffered = this.queuedBytes + (this.outgoing?.writableLength ?? 0);
    if (buffered > this.maxBufferedBytes) this.cutOffClient(buffered);
    return written;
  }

  private cutOffClient(buffered: number): void {
    this.cut = true;
    this.onCutOff(buffered);
    // Destroying the response closes the socket; the stream's queue is then cancelled, which
    // settles the writes still waiting in it.
    if (this.outgoing) this.outgoing.destroy();
    else this.out.abort();
  }
}
