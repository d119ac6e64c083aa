/**
 * Progress people can see on chat platforms that edit messages (Telegram today; Discord and Slack
 * go through the same parts): a running turn's reply and tool activity shown in a message edited
 * in place, throttled per chat, and what becomes of those messages when the turn ends.
 *
 * The promise of the outbox stays: the final reply is the outbox row. Every message a draft
 * posts is recorded (turn, piece, message id, the text it shows) before the next edit, so the
 * delivery of the reply edits it into the final text instead of posting a second copy, and a
 * turn cut off (stop, crash) has its messages edited to say so, in this process or the next.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { TurnEvent } from "../agent/types.js";
import type { ChatAddress, OutboundReply } from "../contract/platform.js";
import type { StreamMessage, StreamTurn } from "../sessions/store.js";

export type ToolProgressMode = "off" | "compact" | "verbose";

/** Appended to the last message of a reply that was cut off; the text above it stays. */
export const INTERRUPTED_MARK = "\n\n⚠️ Interrupted: this answer was cut off before it finished.";
/** Room left in each preview piece for the interrupted mark. */
const MARK_RESERVE = 80;
/** A command shown in a tool line is cut to this many characters. */
const TOOL_ARG_MAX = 80;
/** Verbose mode: the last lines and characters of a tool's output. */
const TAIL_LINES = 3;
const TAIL_MAX = 200;
/** Consecutive failed preview calls after which a draft stops updating (the final still comes). */
const MAX_FAILURES = 3;

/** What the stream editor needs from a platform to show previews. */
export interface PreviewTransport {
  /** Largest text of one message, in UTF-16 units. */
  readonly limit: number;
  /** Posts plain text; `first` is a reply's first piece (it answers the user's message). */
  send(address: ChatAddress, text: string, first: boolean): Promise<string>;
  /** Replaces a message's text (plain); an unchanged text is not an error. */
  edit(address: ChatAddress, messageId: string, text: string): Promise<void>;
  /** The wait the platform asks for when `err` is flood control (HTTP 429), else null. */
  retryAfterMs(err: unknown): number | null;
  /** Least time between two preview calls in this chat (platform and chat-type rules). */
  minIntervalMs(address: ChatAddress): number;
}

/** Which piece of which reply a newly posted final message is (for the platform's dedup key). */
export interface PieceOrigin {
  reply: OutboundReply;
  index: number;
}

/** Final-reply calls: the platform formats the pieces it is given. */
export interface FinalTransport {
  /**
   * Posts a piece as a new message. `origin` lets a platform make the post idempotent (Discord's
   * nonce, Slack's metadata read-back) so a retry after a crash finds the message it posted.
   */
  sendPiece(
    address: ChatAddress,
    piece: string,
    first: boolean,
    origin?: PieceOrigin,
  ): Promise<string>;
  /** Edits a message into a formatted piece; false when the message is gone (send a new one). */
  editPiece(address: ChatAddress, messageId: string, piece: string): Promise<boolean>;
  /** Edits a message into plain text (the interrupted mark). */
  editPlain(address: ChatAddress, messageId: string, text: string): Promise<boolean>;
  remove(address: ChatAddress, messageId: string): Promise<void>;
}

/** The store methods the stream editor records through. */
export interface StreamLedger {
  saveStreamMessage(message: StreamMessage): Promise<void>;
}

function chatKey(address: ChatAddress): string {
  return `${address.platform}:${address.chatId}`;
}

/**
 * One gate per chat for preview calls: at most one call per the chat's interval, and none while
 * the platform's flood control (429 `retry_after`) lasts. Previews wait for it; they never sleep
 * inline and never send a replacement message.
 */
export class ChatGate {
  private readonly next = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** When the next preview call to the chat may go (epoch ms). */
  readyAt(address: ChatAddress): number {
    return this.next.get(chatKey(address)) ?? 0;
  }

  /** A call went to the chat (preview or final): the next preview waits `intervalMs`. */
  note(address: ChatAddress, intervalMs: number): void {
    this.push(address, this.now() + intervalMs);
  }

  /** Flood control: no preview in this chat for `ms`. */
  suspend(address: ChatAddress, ms: number): void {
    this.push(address, this.now() + ms);
  }

  /**
   * Runs a final call at the chat's pace: it waits its turn (at most `maxWaitMs`, then goes
   * anyway; the platform's own 429 handling covers the rest) and holds back the next call.
   */
  async pace<T>(
    address: ChatAddress,
    intervalMs: number,
    call: () => Promise<T>,
    signal?: AbortSignal,
    maxWaitMs = 60_000,
  ): Promise<T> {
    const waitMs = this.readyAt(address) - this.now();
    if (waitMs > 0) {
      await sleep(Math.min(waitMs, maxWaitMs), undefined, { signal }).catch(() => {});
    }
    try {
      return await call();
    } finally {
      this.note(address, intervalMs);
    }
  }

  private push(address: ChatAddress, at: number): void {
    const key = chatKey(address);
    this.next.set(key, Math.max(this.next.get(key) ?? 0, at));
    if (this.next.size > 1000) {
      const now = this.now();
      for (const [k, t] of this.next) if (t < now) this.next.delete(k);
    }
  }
}

export interface DraftOptions {
  turnId: number;
  address: ChatAddress;
  transport: PreviewTransport;
  gate: ChatGate;
  ledger: StreamLedger;
  /** Show the reply's text as it arrives (`display.streaming`). */
  streamText: boolean;
  toolProgress: ToolProgressMode;
  /** Text shows once it has a sentence end, or after this long (the first ~second of text). */
  firstShowMs?: number;
  onError?(err: unknown): void;
  now?: () => number;
}

type Segment = { kind: "text"; text: string } | { kind: "tool"; text: string };

/**
 * The preview of one running turn: the reply's text and a line per tool call, in the order they
 * happen, posted as a message and edited as it grows (a new message past the platform's limit).
 * Plain text; the final reply is formatted when it is delivered.
 */
export class StreamDraft {
  private readonly segments: Segment[] = [];
  /** Pieces that are full (a later piece exists): their text no longer changes. */
  private readonly frozen: string[] = [];
  /** Characters of the rendered preview the frozen pieces cover. */
  private frozenUpTo = 0;
  /** Per piece: the message id and the text it shows. */
  private readonly shown: { messageId: string; text: string }[] = [];
  private textSince: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private failures = 0;
  private closed = false;
  private readonly now: () => number;

  constructor(private readonly options: DraftOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Takes one event of the running turn into the preview. */
  onEvent(event: TurnEvent): void {
    if (this.closed) return;
    const mode = this.options.toolProgress;
    if (event.type === "text_delta") {
      if (!this.options.streamText || event.text === "") return;
      const last = this.segments.at(-1);
      if (last?.kind === "text") last.text += event.text;
      else this.segments.push({ kind: "text", text: event.text });
      this.textSince ??= this.now();
    } else if (event.type === "tool_start") {
      if (mode === "off") return;
      this.segments.push({ kind: "tool", text: toolLine(event.name, event.arguments) });
    } else {
      if (mode !== "verbose") return;
      const tail = outputTail(event.output);
      const last = this.segments.at(-1);
      if (tail && last?.kind === "tool") last.text += `\n${event.isError ? "✗" : "↳"} ${tail}`;
    }
    this.schedule();
  }

  /** Stops updating; resolves once no preview call is under way (the messages stay as they are). */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.inFlight;
  }

  /** The preview as one text, segments one per line. */
  private render(): string {
    return this.segments.map((s) => s.text).join("\n");
  }

  /** Worth showing: tool lines at once, text once it has a sentence or has grown for a while. */
  private ready(): boolean {
    if (this.segments.some((s) => s.kind === "tool")) return true;
    if (this.textSince === null) return false;
    const text = this.render();
    // The ellipsis as an escape: the code every start loads stays Latin-1 (scripts/bundle.mjs).
    if (/[.!?\u2026:;](\s|$)|\n/.test(text)) return true;
    return this.now() - this.textSince >= (this.options.firstShowMs ?? 1000);
  }

  private schedule(): void {
    if (this.closed || this.timer || this.inFlight || this.failures >= MAX_FAILURES) return;
    let wait: number;
    if (this.ready()) {
      wait = Math.max(0, this.options.gate.readyAt(this.options.address) - this.now());
    } else if (this.textSince !== null) {
      wait = this.textSince + (this.options.firstShowMs ?? 1000) - this.now();
    } else {
      return;
    }
    this.timer = setTimeout(
      () => {
        this.timer = null;
        if (!this.ready()) {
          this.schedule();
          return;
        }
        if (this.options.gate.readyAt(this.options.address) > this.now()) {
          this.schedule();
          return;
        }
        this.inFlight = this.step().finally(() => {
          this.inFlight = null;
          if (this.pieces().some((text, i) => this.shown[i]?.text !== text)) this.schedule();
        });
      },
      Math.max(0, wait),
    );
  }

  /** The preview split into pieces; full pieces are frozen so their text stays put. */
  private pieces(): string[] {
    const limit = this.options.transport.limit - MARK_RESERVE;
    const text = this.render();
    let live = text.slice(this.frozenUpTo);
    while (live.length > limit) {
      const { piece, consumed } = cutPiece(live, limit);
      this.frozen.push(piece);
      this.frozenUpTo += consumed;
      live = text.slice(this.frozenUpTo);
    }
    return live.trim() === "" ? [...this.frozen] : [...this.frozen, live];
  }

  /** One call: the first piece whose message is missing or behind gets sent or edited. */
  private async step(): Promise<void> {
    const { transport, gate, ledger, address, turnId } = this.options;
    const pieces = this.pieces();
    const index = pieces.findIndex((text, i) => this.shown[i]?.text !== text);
    if (index < 0) return;
    const text = pieces[index]!;
    try {
      const shown = this.shown[index];
      const save = (messageId: string) =>
        ledger.saveStreamMessage({ turnId, piece: index, address, messageId, text, state: "open" });
      if (shown) {
        // Recorded before it shows: a crash after the edit leaves the record complete.
        await save(shown.messageId);
        await transport.edit(address, shown.messageId, text);
        shown.text = text;
      } else {
        const messageId = await transport.send(address, text, index === 0);
        this.shown[index] = { messageId, text };
        await save(messageId);
      }
      this.failures = 0;
      gate.note(address, transport.minIntervalMs(address));
    } catch (err) {
      const retryAfter = transport.retryAfterMs(err);
      if (retryAfter !== null) {
        gate.suspend(address, Math.min(retryAfter, 60_000));
      } else {
        this.failures += 1;
        gate.note(address, transport.minIntervalMs(address));
      }
      this.options.onError?.(err);
    }
  }
}

/** "⚙️ terminal: `npm test`": the tool and the first line of its main argument. */
export function toolLine(name: string, args: string): string {
  const icon = name === "read_file" || name === "write_file" ? "📄" : "⚙️";
  const detail = mainArgument(args);
  return detail ? `${icon} ${name}: \`${detail}\`` : `${icon} ${name}`;
}

function mainArgument(args: string): string {
  let value: unknown;
  try {
    const parsed = JSON.parse(args) as Record<string, unknown>;
    value = parsed.command ?? parsed.path ?? parsed.url ?? parsed.query ?? parsed.name;
  } catch {
    return "";
  }
  if (typeof value !== "string") return "";
  const line = (value.split("\n", 1)[0] ?? "").replaceAll("`", "'").trim();
  return line.length > TOOL_ARG_MAX ? `${line.slice(0, TOOL_ARG_MAX - 1)}…` : line;
}

function outputTail(output: string): string {
  const lines = output.trimEnd().split("\n").slice(-TAIL_LINES).join(" ⏎ ");
  return lines.length > TAIL_MAX ? `…${lines.slice(-TAIL_MAX)}` : lines;
}

/** Cuts a piece of at most `limit` units at a line or word boundary (never inside a pair). */
function cutPiece(text: string, limit: number): { piece: string; consumed: number } {
  for (const separator of ["\n", " "]) {
    const at = text.lastIndexOf(separator, limit);
    if (at >= limit / 2) return { piece: text.slice(0, at), consumed: at + 1 };
  }
  let end = limit;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return { piece: text.slice(0, end), consumed: end };
}

/** The messages of a stream that still show something (not removed). */
function visible(turn: StreamTurn): StreamMessage[] {
  return turn.messages.filter((m) => m.state !== "deleted");
}

/**
 * Edits a cut-off stream to say so: the last message keeps its text and gets the interrupted
 * mark; every message is recorded `interrupted` after its edit (a crash before repeats the edit,
 * which changes nothing).
 */
export async function markInterrupted(
  turn: StreamTurn,
  transport: FinalTransport,
  ledger: StreamLedger,
): Promise<void> {
  const open = turn.messages.filter((m) => m.state === "open");
  const last = visible(turn).at(-1);
  for (const message of open) {
    let text = message.text;
    if (message === last && !text.endsWith(INTERRUPTED_MARK)) {
      text = `${text}${INTERRUPTED_MARK}`;
      const edited = await transport.editPlain(message.address, message.messageId, text);
      if (!edited) text = message.text;
    }
    await ledger.saveStreamMessage({ ...message, text, state: "interrupted" });
  }
}

/**
 * Delivers a final reply into a turn's stream: piece i replaces message i, pieces beyond the
 * stream are sent as new messages, and stream messages beyond the reply are removed. Each step
 * is recorded once done, so a retry after a crash repeats nothing already shown. With no stream,
 * the pieces are simply sent (and recorded when there are several, for the same reason).
 */
export async function deliverIntoStream(
  turn: StreamTurn,
  pieces: string[],
  address: ChatAddress,
  transport: FinalTransport,
  ledger: StreamLedger,
  reply?: OutboundReply,
): Promise<void> {
  // Messages already marked interrupted keep saying so; only open or final ones are reused.
  const live = turn.messages.filter((m) => m.state === "open" || m.state === "final");
  const byPiece = new Map(live.map((m) => [m.piece, m]));
  const record = pieces.length > 1 || turn.messages.length > 0;
  for (const [index, piece] of pieces.entries()) {
    const existing = byPiece.get(index);
    if (existing?.state === "final" && existing.text === piece) continue;
    let messageId = existing ? existing.messageId : null;
    if (messageId !== null && !(await transport.editPiece(address, messageId, piece))) {
      messageId = null;
    }
    messageId ??= await transport.sendPiece(
      address,
      piece,
      index === 0,
      reply ? { reply, index } : undefined,
    );
    if (record) {
      await ledger.saveStreamMessage({
        turnId: turn.turnId,
        piece: index,
        address,
        messageId,
        text: piece,
        state: "final",
      });
    }
  }
  for (const message of live) {
    if (message.piece < pieces.length) continue;
    await transport.remove(message.address, message.messageId);
    await ledger.saveStreamMessage({ ...message, state: "deleted" });
  }
}

/** Removes a turn's status messages (tool lines shown while the reply itself was not streamed). */
export async function removeStream(
  turn: StreamTurn,
  transport: FinalTransport,
  ledger: StreamLedger,
): Promise<void> {
  for (const message of visible(turn)) {
    await transport.remove(message.address, message.messageId);
    await ledger.saveStreamMessage({ ...message, state: "deleted" });
  }
}
