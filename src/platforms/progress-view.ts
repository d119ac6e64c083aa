/**
 * Progress on a chat platform that edits messages, independent of the platform: a draft per
 * running turn, the final reply delivered into the streamed messages, and the sweep that marks
 * previews nothing will finish. A platform supplies (`PlatformProgress`) its transports, its pace
 * per chat, how it splits a reply into pieces, and its usual send for replies without a stream;
 * the view keeps each chat's pace for previews and final calls alike.
 */
import type { Logger } from "pino";
import type { ChatAddress, OutboundReply, ProgressUpdate } from "../contract/platform.js";
import type { StreamStore } from "../sessions/store.js";
import {
  ChatGate,
  deliverIntoStream,
  type FinalTransport,
  markInterrupted,
  type PreviewTransport,
  removeStream,
  StreamDraft,
  type ToolProgressMode,
} from "./stream-editor.js";

/** The store role progress needs. */
export type { StreamStore };

export interface ProgressSettings {
  /** `display.streaming`: the reply's text is shown as it is written. */
  streaming: boolean;
  /** `display.tool_progress`. */
  toolProgress: ToolProgressMode;
  /** Text shows once it has a sentence, or after this long. */
  firstShowMs?: number;
}

/** What an adapter hands its progress view: its `progress` option, its logger and its stop. */
export interface ProgressContext<Settings extends ProgressSettings = ProgressSettings> {
  store: StreamStore;
  settings: Settings;
  logger: Logger;
  /** Aborts when the adapter stops: a call waiting for its chat's turn gives up. */
  signal: AbortSignal;
}

/** Runs `call` in its chat's turn, at the chat's pace (ChatGate.pace). */
export type Paced = <T>(address: ChatAddress, call: () => Promise<T>) => Promise<T>;

/** What is the platform's own in its progress view. */
export interface PlatformProgress {
  /** The platform name the store records stream messages under. */
  platform: string;
  /** Least time between calls in a chat (platform and chat-type rules). */
  minIntervalMs(address: ChatAddress): number;
  preview: Omit<PreviewTransport, "minIntervalMs">;
  /**
   * The final calls, each run through `paced`: they keep the chat's pace too, waiting their turn
   * (a 429 on a final call is the platform sender's to retry).
   */
  final(paced: Paced): FinalTransport;
  /** A reply's text formatted and split into the platform's message pieces. */
  pieces(text: string): string[];
  /** The platform's usual delivery, for a reply with no stream that fits one message. */
  send(reply: OutboundReply): Promise<void>;
  describeError(err: unknown): string;
}

interface ProgressViewOptions extends Omit<PlatformProgress, "preview" | "final">, ProgressContext {
  gate: ChatGate;
  preview: PreviewTransport;
  final: FinalTransport;
}

export class ProgressView {
  private readonly drafts = new Map<number, StreamDraft>();
  /**
   * Drafts of ended turns still closing (a preview being sent and recorded): the turn's reply is
   * often queued before that finishes, and must wait for it or it would be sent as a second
   * message beside the preview.
   */
  private readonly closing = new Map<number, Promise<void>>();
  private sweeping: Promise<void> | null = null;
  private sweepAgain = false;

  private readonly options: ProgressViewOptions;

  constructor(context: ProgressContext, platform: PlatformProgress) {
    const gate = new ChatGate();
    const { minIntervalMs } = platform;
    const paced: Paced = (address, call) =>
      gate.pace(address, minIntervalMs(address), call, context.signal);
    this.options = {
      ...context,
      ...platform,
      gate,
      preview: { ...platform.preview, minIntervalMs },
      final: platform.final(paced),
    };
  }

  /** True when turns get a draft at all. */
  private get enabled(): boolean {
    const { streaming, toolProgress } = this.options.settings;
    return streaming || toolProgress !== "off";
  }

  /**
   * Follows a running turn: a draft per turn, closed (and cleaned up after a cut-off) at its end.
   * Nothing once the adapter stops.
   */
  onProgress(update: ProgressUpdate): void {
    if (!this.enabled || this.options.signal.aborted) return;
    const { settings, store, gate, preview, logger, describeError } = this.options;
    if (update.type === "turn_start") {
      this.drafts.set(
        update.turnId,
        new StreamDraft({
          turnId: update.turnId,
          address: update.address,
          transport: preview,
          gate,
          ledger: store,
          streamText: settings.streaming,
          toolProgress: settings.toolProgress,
          firstShowMs: settings.firstShowMs,
          onError: (err) => logger.debug({ error: describeError(err) }, "preview update failed"),
        }),
      );
      return;
    }
    const draft = this.drafts.get(update.turnId);
    if (update.type === "event") {
      draft?.onEvent(update.event);
      return;
    }
    this.drafts.delete(update.turnId);
    const closed = draft?.close() ?? Promise.resolve();
    if (draft) {
      this.closing.set(update.turnId, closed);
      const forget = () => this.closing.delete(update.turnId);
      closed.then(forget, forget);
    }
    // A reply (done or failed) finishes its stream when it is delivered; a cut-off turn has none.
    if (update.stopReason === "aborted") closed.then(() => this.sweep());
  }

  /**
   * Delivers a reply. A turn's reply becomes its streamed messages (edited in place); a failed
   * turn's stream is marked interrupted and the error follows as a new message; tool lines
   * shown without a streamed reply are removed. Anything else goes the platform's usual way.
   */
  async deliver(reply: OutboundReply): Promise<void> {
    const { store, final, settings } = this.options;
    const turnId = reply.kind === "reply" ? reply.turnId : null;
    if (turnId === null || turnId === undefined) return this.options.send(reply);
    await (this.drafts.get(turnId)?.close() ?? this.closing.get(turnId));
    // An approval question is a card with buttons of its own, never edited into the stream.
    if (reply.approvalId) return this.options.send(reply);
    const pieces = this.options.pieces(reply.text);
    let turn = await store.getStreamTurn(turnId);
    if (turn.messages.length === 0 && pieces.length <= 1) return this.options.send(reply);
    try {
      const open = turn.messages.some((m) => m.state === "open");
      if (open && turn.turnState !== "done") {
        await markInterrupted(turn, final, store);
        turn = await store.getStreamTurn(turnId);
      } else if (open && !settings.streaming) {
        await removeStream(turn, final, store);
        turn = await store.getStreamTurn(turnId);
      }
      await deliverIntoStream(turn, pieces, reply.address, final, store, reply);
    } catch (err) {
      throw new Error(
        `${this.options.platform} did not accept the reply: ${this.options.describeError(err)}`,
        { cause: err },
      );
    }
  }

  /**
   * Marks the streams nothing will finish (their turn was cut off by a stop or a crash, here or
   * in an earlier process) as interrupted; one sweep at a time, failures retried at the next.
   */
  sweep(): Promise<void> {
    if (this.sweeping) {
      this.sweepAgain = true;
      return this.sweeping;
    }
    this.sweeping = this.sweepOnce()
      .catch((err: unknown) => {
        this.options.logger.warn(
          { error: this.options.describeError(err) },
          "cut-off previews not marked",
        );
      })
      .finally(() => {
        this.sweeping = null;
        if (this.sweepAgain) {
          this.sweepAgain = false;
          void this.sweep();
        }
      });
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    const { store, final, platform } = this.options;
    for (const turn of await store.listLeftoverStreams(platform)) {
      if (this.drafts.has(turn.turnId)) continue;
      if (turn.turnState === "done") {
        // Answered, and its reply was delivered or given up: the text stays as it is.
        for (const m of turn.messages) await store.saveStreamMessage({ ...m, state: "final" });
        continue;
      }
      await markInterrupted(turn, final, store);
    }
  }

  /** Stops every draft (the adapter is stopping). */
  async stop(): Promise<void> {
    await Promise.all([...this.drafts.values()].map((d) => d.close()));
    this.drafts.clear();
  }
}
