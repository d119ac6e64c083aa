/**
 * A stand-in Telegram Bot API server on a real loopback socket, for adapter tests, benchmarks and
 * the chaos harness. It follows the real protocol where Keel depends on it: `getUpdates` long
 * polling and offset confirmation, 401/409/429/5xx errors, HTML validation and the 4096-unit limit,
 * and files: photo/document/voice/audio updates, `getFile` and the file download route (the cloud
 * server's 20 MB limit included), and multipart `sendPhoto`/`sendDocument` uploads.
 * Point grammY at it with `new Bot(token, { client: { apiRoot: fake.apiRoot } })`.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { checkTelegramHtml } from "./telegram-html.js";

/** One call the bot made, successful or not, in arrival order. */
export interface SentCall {
  method: string;
  payload: Record<string, unknown>;
  /** False when the fake answered with an error (or dropped the connection). */
  ok: boolean;
  errorCode?: number;
  /** When the fake received it (epoch ms). */
  at: number;
}

/** A message as the user sees it in the chat (bot messages show their final edited text). */
export interface ChatLogEntry {
  messageId: number;
  chatId: string;
  threadId?: number;
  from: "user" | "bot";
  /** Visible text (HTML tags removed and entities decoded for HTML messages). */
  text: string;
  /** The raw text as sent, including markup. */
  rawText: string;
  parseMode?: string;
  replyToMessageId?: number;
  edited: boolean;
  /** Inline keyboard buttons (`reply_markup`); an edit without a keyboard removes them. */
  buttons?: { text: string; callback_data?: string }[][];
  /** The buttons the message was sent with (edits leave this as it was). */
  sentButtons?: { text: string; callback_data?: string }[][];
  /** Visible texts the message showed before its current one, oldest first (one per edit). */
  earlier: string[];
  /** A file the bot sent (sendPhoto/sendDocument); `text` is then its caption. */
  file?: { method: string; name: string; bytes: Buffer };
}

/** A file a user sends (`sendUserFile`). */
export interface UserFileInput {
  chatId: number | string;
  userId?: number | string;
  kind: "photo" | "document" | "voice" | "audio";
  bytes: Buffer;
  caption?: string;
  fileName?: string;
  mime?: string;
  /** The size the message claims (default: the real size), e.g. to stand for a 25 MB file. */
  reportedSize?: number;
}

/** A file part of a multipart upload. */
export interface UploadedFile {
  filename: string;
  data: Buffer;
}

export interface ButtonPressInput {
  chatId: number | string;
  /** The bot message carrying the button. */
  messageId: number;
  userId: number | string;
  /** The button's `callback_data`; the message must carry such a button. */
  data: string;
  firstName?: string;
}

/** An error the next call of a method gets instead of being processed. */
export interface FailSpec {
  error_code: number;
  description?: string;
  retry_after?: number;
  /** Let this many calls of the method succeed first (default 0). */
  afterCalls?: number;
}

export interface UserMessageInput {
  chatId: number | string;
  /** Defaults to the chat id (a private chat's id is the user's id). */
  userId?: number | string;
  text: string;
  /** Forum topic or reply thread (`message_thread_id`). */
  threadId?: number;
  /** Defaults to "private" for positive chat ids, "supergroup" otherwise. */
  chatType?: "private" | "group" | "supergroup";
  replyToMessageId?: number;
  firstName?: string;
}

export type TelegramUpdate = { update_id: number } & Record<string, unknown>;

export interface FakeTelegram {
  /** Base URL for grammY's `client.apiRoot`, e.g. `http://127.0.0.1:40123`. */
  readonly apiRoot: string;
  readonly token: string;
  /** Every call the bot made, including getUpdates and failed calls, in arrival order. */
  readonly sent: SentCall[];
  /** Queues a text message from a user as a `message` update; wakes a waiting long poll. */
  sendUserMessage(input: UserMessageInput): { update_id: number; message_id: number };
  /** Queues a message with a file from a user; the file is then served by getFile. */
  sendUserFile(input: UserFileInput): { update_id: number; message_id: number; file_id: string };
  /** How many times the bytes of a file were downloaded (its URL fetched successfully). */
  downloads(fileId: string): number;
  /**
   * A user presses an inline button: queues a `callback_query` update, as Telegram does. Throws
   * when the message does not (or no longer) carry that button.
   */
  pressButton(input: ButtonPressInput): { update_id: number; callback_query_id: string };
  /** The bot's `answerCallbackQuery` calls by query id: the text shown (null without text). */
  callbackAnswers(): Map<string, string | null>;
  /** Queues an arbitrary update; assigns the next `update_id` unless one is given. Returns it. */
  pushUpdate(update: Record<string, unknown>): number;
  /** Calls `listener` with every call as it is recorded (for benchmarks); returns an unsubscribe. */
  onCall(listener: (call: SentCall) => void): () => void;
  /** Resolves with the first (past or future) call matching `predicate`; rejects after timeoutMs. */
  waitForSent(predicate: (call: SentCall) => boolean, timeoutMs?: number): Promise<SentCall>;
  /**
   * The next call of `method` gets this error (queued: call twice for two failures; `afterCalls`
   * lets that many calls through first).
   */
  failNext(method: string, spec: FailSpec): void;
  /**
   * Destroys the socket of the next call of `method`: the client sees a network error. By default
   * the call is not processed; with `afterProcessing` it is (a lost response).
   */
  dropNextConnection(method: string, options?: { afterProcessing?: boolean }): void;
  /** The next call of `method` is never answered (until close), like a wedged server. */
  hangNext(method: string): void;
  /** The highest offset a getUpdates call has confirmed (0 before any). */
  confirmedOffset(): number;
  /** Updates queued and not confirmed yet, oldest first. */
  pendingUpdates(): TelegramUpdate[];
  /**
   * What a user sees in a chat (optionally one thread), oldest first: bot messages with their
   * latest edit; deleted messages are gone.
   */
  chatLog(chatId: number | string, threadId?: number): ChatLogEntry[];
  /** The commands last registered with setMyCommands. */
  commands(): { command: string; description: string }[];
  /** Closes the server and every open connection (waiting long polls included). */
  close(): Promise<void>;
}

type Payload = Record<string, unknown>;
type Reply = { status: number; body: Payload };

interface HeldPoll {
  res: ServerResponse;
  limit: number;
  timer: NodeJS.Timeout;
}

const BOT_USER = { id: 777000111, is_bot: true, first_name: "Keel", username: "keel_test_bot" };

function ok(result: unknown): Reply {
  return { status: 200, body: { ok: true, result } };
}

function fail(error_code: number, description: string, retry_after?: number): Reply {
  const body: Payload = { ok: false, error_code, description };
  if (retry_after !== undefined) body.parameters = { retry_after };
  return { status: error_code, body };
}

function coerceFormValue(value: string): unknown {
  const trimmed = value.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return JSON.parse(trimmed);
    } catch {
      // Not JSON after all: Telegram would treat it as a string too.
    }
  }
  return value;
}

function parseMultipart(body: Buffer, contentType: string): Payload {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  const payload: Payload = {};
  if (!boundary) return payload;
  const delimiter = `--${boundary[1] ?? boundary[2]}`;
  for (const part of body.toString("latin1").split(delimiter)) {
    const headerEnd = part.indexOf("\r\n\r\n");
    if (headerEnd < 0) continue;
    const name = /name="([^"]*)"/.exec(part.slice(0, headerEnd));
    if (!name) continue;
    const raw = part.slice(headerEnd + 4).replace(/\r\n$/, "");
    const filename = /filename="?([^";\r\n]*)"?/.exec(part.slice(0, headerEnd));
    payload[name[1]!] = filename
      ? ({ filename: filename[1]!, data: Buffer.from(raw, "latin1") } satisfies UploadedFile)
      : coerceFormValue(Buffer.from(raw, "latin1").toString("utf8"));
  }
  // grammY names a file field `attach://<part>` and sends the bytes in that part.
  for (const [key, value] of Object.entries(payload)) {
    if (typeof value === "string" && value.startsWith("attach://")) {
      payload[key] = payload[value.slice("attach://".length)];
    }
  }
  return payload;
}

function parseBody(body: Buffer, contentType: string, query: URLSearchParams): Payload {
  const payload: Payload = {};
  for (const [key, value] of query) payload[key] = coerceFormValue(value);
  if (body.length === 0) return payload;
  if (contentType.includes("application/json")) {
    return { ...payload, ...(JSON.parse(body.toString("utf8")) as Payload) };
  }
  if (contentType.includes("multipart/form-data")) {
    return { ...payload, ...parseMultipart(body, contentType) };
  }
  for (const [key, value] of new URLSearchParams(body.toString("utf8"))) {
    payload[key] = coerceFormValue(value);
  }
  return payload;
}

function utf16Length(text: string): number {
  return text.length;
}

/** Starts the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeTelegram(options: { token: string }): Promise<FakeTelegram> {
  const state = new FakeState(options.token);
  const server = createServer((req, res) => state.handle(req, res));
  const sockets = new Set<Socket>();
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const apiRoot = `http://127.0.0.1:${port}`;
  return {
    apiRoot,
    token: options.token,
    sent: state.sent,
    sendUserMessage: (input) => state.sendUserMessage(input),
    sendUserFile: (input) => state.sendUserFile(input),
    downloads: (fileId) => state.downloadCounts.get(fileId) ?? 0,
    pushUpdate: (update) => state.pushUpdate(update),
    pressButton: (input) => state.pressButton(input),
    callbackAnswers: () => new Map(state.callbackAnswers),
    onCall: (listener) => {
      state.listeners.add(listener);
      return () => state.listeners.delete(listener);
    },
    waitForSent: (predicate, timeoutMs = 5_000) => state.waitForSent(predicate, timeoutMs),
    failNext: (method, spec) => state.queueFailure(method, spec),
    dropNextConnection: (method, dropOptions) =>
      state.queueDrop(method, dropOptions?.afterProcessing ?? false),
    hangNext: (method) => state.queueHang(method),
    confirmedOffset: () => state.confirmed,
    pendingUpdates: () => [...state.updates],
    chatLog: (chatId, threadId) => state.chatLog(String(chatId), threadId),
    commands: () => [...state.registeredCommands],
    close: async () => {
      state.closing = true;
      state.releasePoll();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

class FakeState {
  readonly sent: SentCall[] = [];
  readonly listeners = new Set<(call: SentCall) => void>();
  updates: TelegramUpdate[] = [];
  confirmed = 0;
  closing = false;
  registeredCommands: { command: string; description: string }[] = [];
  readonly downloadCounts = new Map<string, number>();
  private readonly files = new Map<string, { bytes: Buffer; size: number }>();
  private nextFileId = 1;
  readonly callbackAnswers = new Map<string, string | null>();
  private readonly callbackQueries = new Set<string>();
  private nextCallbackId = 1;
  private nextUpdateId = 100_001;
  private readonly nextMessageId = new Map<string, number>();
  private readonly chatTypes = new Map<string, string>();
  private readonly log = new Map<string, ChatLogEntry[]>();
  private readonly failures = new Map<string, FailSpec[]>();
  private readonly drops = new Map<string, boolean[]>();
  private readonly hangs = new Map<string, number>();
  private readonly waiters = new Set<{
    predicate: (c: SentCall) => boolean;
    done: (c: SentCall) => void;
  }>();
  private held: HeldPoll | null = null;

  constructor(private readonly token: string) {}

  handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => this.dispatch(req, res, Buffer.concat(chunks)));
  }

  private dispatch(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const url = new URL(req.url ?? "/", "http://fake");
    const download = /^\/file\/bot([^/]+)\/files\/([^/]+)$/.exec(url.pathname);
    if (download) {
      this.serveFile(res, download[1]!, download[2]!);
      return;
    }
    const match = /^\/bot([^/]+)\/([A-Za-z]+)$/.exec(url.pathname);
    if (!match) {
      this.respond(res, fail(404, "Not Found"));
      return;
    }
    const method = match[2]!;
    let payload: Payload;
    try {
      payload = parseBody(body, req.headers["content-type"] ?? "", url.searchParams);
    } catch {
      this.respond(res, fail(400, "Bad Request: invalid JSON in request body"));
      return;
    }
    if (match[1] !== this.token) {
      this.finish(res, method, payload, fail(401, "Unauthorized"));
      return;
    }
    const hang = this.hangs.get(method) ?? 0;
    if (hang > 0) {
      this.hangs.set(method, hang - 1);
      this.record({ method, payload, ok: false, at: Date.now() });
      return;
    }
    const drop = this.drops.get(method)?.shift();
    if (drop === false) {
      this.record({ method, payload, ok: false, at: Date.now() });
      res.socket?.destroy();
      return;
    }
    const failure = this.takeFailure(method);
    if (failure) {
      const description = failure.description ?? defaultDescription(failure);
      this.finish(res, method, payload, fail(failure.error_code, description, failure.retry_after));
      return;
    }
    if (method === "getUpdates") {
      if (drop === true) {
        // The server confirmed the offset, but the client never sees the answer.
        this.applyOffset(Number(payload.offset ?? 0));
        this.record({ method, payload, ok: false, at: Date.now() });
        res.socket?.destroy();
        return;
      }
      this.getUpdates(res, payload);
      return;
    }
    const reply = this.call(method, payload);
    if (drop === true) {
      this.record({ method, payload, ok: false, at: Date.now() });
      res.socket?.destroy();
      return;
    }
    this.finish(res, method, payload, reply);
  }

  private finish(res: ServerResponse, method: string, payload: Payload, reply: Reply): void {
    const call: SentCall = { method, payload, ok: reply.status === 200, at: Date.now() };
    if (reply.status !== 200) call.errorCode = reply.status;
    this.record(call);
    this.respond(res, reply);
  }

  private respond(res: ServerResponse, reply: Reply): void {
    if (res.destroyed || res.writableEnded) return;
    const text = JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
  }

  private record(call: SentCall): void {
    this.sent.push(call);
    for (const listener of this.listeners) listener(call);
    for (const waiter of this.waiters) {
      if (waiter.predicate(call)) waiter.done(call);
    }
  }

  waitForSent(predicate: (call: SentCall) => boolean, timeoutMs: number): Promise<SentCall> {
    const found = this.sent.find(predicate);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const waiter = {
        predicate,
        done: (call: SentCall) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(call);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`waitForSent timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  queueFailure(method: string, spec: FailSpec): void {
    const queue = this.failures.get(method) ?? [];
    queue.push({ ...spec });
    this.failures.set(method, queue);
  }

  private takeFailure(method: string): FailSpec | undefined {
    const queue = this.failures.get(method);
    const head = queue?.[0];
    if (!head) return undefined;
    if ((head.afterCalls ?? 0) > 0) {
      head.afterCalls = (head.afterCalls ?? 0) - 1;
      return undefined;
    }
    return queue.shift();
  }

  queueHang(method: string): void {
    this.hangs.set(method, (this.hangs.get(method) ?? 0) + 1);
  }

  queueDrop(method: string, afterProcessing: boolean): void {
    const queue = this.drops.get(method) ?? [];
    queue.push(afterProcessing);
    this.drops.set(method, queue);
  }

  private getUpdates(res: ServerResponse, payload: Payload): void {
    if (this.held && !this.held.res.destroyed) {
      const conflict =
        "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";
      this.finish(res, "getUpdates", payload, fail(409, conflict));
      return;
    }
    this.record({ method: "getUpdates", payload, ok: true, at: Date.now() });
    const offset = Number(payload.offset ?? 0);
    const limit = Math.min(Math.max(Number(payload.limit ?? 100), 1), 100);
    const timeoutSec = Number(payload.timeout ?? 0);
    this.applyOffset(offset);
    if (this.updates.length > 0 || timeoutSec <= 0 || this.closing) {
      this.respond(res, ok(this.updates.slice(0, limit)));
      return;
    }
    const timer = setTimeout(() => this.releasePoll(), timeoutSec * 1000);
    this.held = { res, limit, timer };
    res.on("close", () => {
      if (this.held?.res === res) {
        clearTimeout(timer);
        this.held = null;
      }
    });
  }

  private applyOffset(offset: number): void {
    if (offset > 0) {
      this.updates = this.updates.filter((u) => u.update_id >= offset);
      this.confirmed = Math.max(this.confirmed, offset);
    } else if (offset < 0) {
      const kept = this.updates.slice(offset);
      const first = kept[0];
      if (first) this.confirmed = Math.max(this.confirmed, first.update_id);
      this.updates = kept;
    }
  }

  /** Answers the waiting long poll (if any) with whatever is queued now. */
  releasePoll(): void {
    const held = this.held;
    if (!held) return;
    this.held = null;
    clearTimeout(held.timer);
    this.respond(held.res, ok(this.updates.slice(0, held.limit)));
  }

  pushUpdate(update: Record<string, unknown>): number {
    const given = typeof update.update_id === "number" ? update.update_id : undefined;
    const id = given ?? this.nextUpdateId;
    this.nextUpdateId = Math.max(this.nextUpdateId, id + 1);
    this.updates.push({ ...update, update_id: id });
    this.updates.sort((a, b) => a.update_id - b.update_id);
    if (this.held) this.releasePoll();
    return id;
  }

  private allocateMessageId(chatId: string): number {
    const id = this.nextMessageId.get(chatId) ?? 1;
    this.nextMessageId.set(chatId, id + 1);
    return id;
  }

  private chat(chatId: string): Payload {
    const type = this.chatTypes.get(chatId) ?? (Number(chatId) > 0 ? "private" : "supergroup");
    return { id: Number(chatId), type, ...(type === "private" ? {} : { title: "Test group" }) };
  }

  sendUserMessage(input: UserMessageInput): { update_id: number; message_id: number } {
    const chatId = String(input.chatId);
    const type = input.chatType ?? (Number(chatId) > 0 ? "private" : "supergroup");
    this.chatTypes.set(chatId, type);
    const messageId = this.allocateMessageId(chatId);
    const userId = Number(input.userId ?? input.chatId);
    const message: Payload = {
      message_id: messageId,
      date: Math.floor(Date.now() / 1000),
      chat: this.chat(chatId),
      from: { id: userId, is_bot: false, first_name: input.firstName ?? "Tester" },
      text: input.text,
    };
    if (input.threadId !== undefined) {
      message.message_thread_id = input.threadId;
      message.is_topic_message = true;
    }
    if (input.replyToMessageId !== undefined) {
      message.reply_to_message = {
        message_id: input.replyToMessageId,
        date: 0,
        chat: this.chat(chatId),
      };
    }
    this.appendLog({
      messageId,
      chatId,
      threadId: input.threadId,
      from: "user",
      text: input.text,
      rawText: input.text,
      replyToMessageId: input.replyToMessageId,
      edited: false,
      earlier: [],
    });
    const updateId = this.pushUpdate({ message });
    return { update_id: updateId, message_id: messageId };
  }

  sendUserFile(input: UserFileInput): { update_id: number; message_id: number; file_id: string } {
    const chatId = String(input.chatId);
    this.chatTypes.set(chatId, Number(chatId) > 0 ? "private" : "supergroup");
    const messageId = this.allocateMessageId(chatId);
    const fileId = `file-${this.nextFileId++}`;
    const size = input.reportedSize ?? input.bytes.length;
    this.files.set(fileId, { bytes: input.bytes, size });
    const base = { file_id: fileId, file_unique_id: `u${fileId}`, file_size: size };
    const media: Payload =
      input.kind === "photo"
        ? {
            photo: [
              { ...base, file_id: `${fileId}-thumb`, width: 90, height: 90, file_size: 100 },
              { ...base, width: 1280, height: 960 },
            ],
          }
        : input.kind === "voice"
          ? { voice: { ...base, duration: 2, mime_type: input.mime ?? "audio/ogg" } }
          : {
              [input.kind]: {
                ...base,
                ...(input.kind === "audio" && { duration: 5 }),
                ...(input.fileName !== undefined && { file_name: input.fileName }),
                ...(input.mime !== undefined && { mime_type: input.mime }),
              },
            };
    const message: Payload = {
      message_id: messageId,
      date: Math.floor(Date.now() / 1000),
      chat: this.chat(chatId),
      from: { id: Number(input.userId ?? input.chatId), is_bot: false, first_name: "Tester" },
      ...media,
      ...(input.caption !== undefined && { caption: input.caption }),
    };
    this.appendLog({
      messageId,
      chatId,
      from: "user",
      text: input.caption ?? "",
      rawText: input.caption ?? "",
      edited: false,
      earlier: [],
    });
    const updateId = this.pushUpdate({ message });
    return { update_id: updateId, message_id: messageId, file_id: fileId };
  }

  /** `GET /file/bot<token>/files/<id>`: the bytes, counted; failNext("downloadFile") applies. */
  private serveFile(res: ServerResponse, token: string, fileId: string): void {
    const file = this.files.get(fileId);
    const failure = this.takeFailure("downloadFile");
    if (token !== this.token || !file || failure) {
      res.writeHead(failure?.error_code ?? 404).end();
      return;
    }
    this.downloadCounts.set(fileId, (this.downloadCounts.get(fileId) ?? 0) + 1);
    res.writeHead(200, { "content-length": file.bytes.length }).end(file.bytes);
  }

  private getFile(payload: Payload): Reply {
    const fileId = String(payload.file_id ?? "");
    const file = this.files.get(fileId);
    if (!file) return fail(400, "Bad Request: invalid file_id");
    // The cloud Bot API serves at most 20 MB.
    if (file.size > 20 * 1_048_576) return fail(400, "Bad Request: file is too big");
    return ok({
      file_id: fileId,
      file_unique_id: `u${fileId}`,
      file_size: file.size,
      file_path: `files/${fileId}`,
    });
  }

  private sendFile(method: "sendPhoto" | "sendDocument", payload: Payload): Reply {
    const field = method === "sendPhoto" ? "photo" : "document";
    const upload = payload[field] as UploadedFile | undefined;
    if (payload.chat_id === undefined) return fail(400, "Bad Request: chat_id is empty");
    if (!upload || typeof upload !== "object" || !Buffer.isBuffer(upload.data)) {
      return fail(400, `Bad Request: there is no ${field} in the request`);
    }
    const caption = typeof payload.caption === "string" ? payload.caption : "";
    if ([...caption].length > 1024) return fail(400, "Bad Request: message caption is too long");
    const chatId = String(payload.chat_id);
    const messageId = this.allocateMessageId(chatId);
    const replyParameters = payload.reply_parameters as { message_id?: unknown } | undefined;
    this.appendLog({
      messageId,
      chatId,
      from: "bot",
      text: caption,
      rawText: caption,
      replyToMessageId:
        replyParameters?.message_id === undefined ? undefined : Number(replyParameters.message_id),
      edited: false,
      earlier: [],
      file: { method, name: upload.filename, bytes: upload.data },
    });
    return ok({
      message_id: messageId,
      date: Math.floor(Date.now() / 1000),
      chat: this.chat(chatId),
      from: BOT_USER,
      ...(caption && { caption }),
      [field]:
        field === "photo"
          ? [{ file_id: `sent-${messageId}`, file_unique_id: "x", width: 1, height: 1 }]
          : { file_id: `sent-${messageId}`, file_unique_id: "x", file_name: upload.filename },
    });
  }

  pressButton(input: ButtonPressInput): { update_id: number; callback_query_id: string } {
    const chatId = String(input.chatId);
    const entry = this.log
      .get(chatId)
      ?.find((e) => e.from === "bot" && e.messageId === input.messageId);
    const button = entry?.buttons?.flat().find((b) => b.callback_data === input.data);
    if (!entry || !button) {
      throw new Error(`message ${input.messageId} in chat ${chatId} has no button ${input.data}`);
    }
    const id = `cbq-${this.nextCallbackId++}`;
    this.callbackQueries.add(id);
    const userId = Number(input.userId);
    const update_id = this.pushUpdate({
      callback_query: {
        id,
        from: { id: userId, is_bot: false, first_name: input.firstName ?? "Tester" },
        message: {
          message_id: entry.messageId,
          date: Math.floor(Date.now() / 1000),
          chat: this.chat(chatId),
          from: BOT_USER,
          text: entry.text,
        },
        chat_instance: `ci-${chatId}`,
        data: input.data,
      },
    });
    return { update_id, callback_query_id: id };
  }

  private answerCallbackQuery(payload: Payload): Reply {
    const id = String(payload.callback_query_id ?? "");
    if (!this.callbackQueries.has(id)) {
      return fail(
        400,
        "Bad Request: query is too old and response timeout expired or query ID is invalid",
      );
    }
    this.callbackAnswers.set(id, typeof payload.text === "string" ? payload.text : null);
    return ok(true);
  }

  private appendLog(entry: ChatLogEntry): void {
    const entries = this.log.get(entry.chatId) ?? [];
    entries.push(entry);
    this.log.set(entry.chatId, entries);
  }

  chatLog(chatId: string, threadId?: number): ChatLogEntry[] {
    const entries = this.log.get(chatId) ?? [];
    return threadId === undefined ? [...entries] : entries.filter((e) => e.threadId === threadId);
  }

  private call(method: string, payload: Payload): Reply {
    switch (method) {
      case "getMe":
        return ok(BOT_USER);
      case "deleteWebhook":
        if (payload.drop_pending_updates === true || payload.drop_pending_updates === "true") {
          this.updates = [];
        }
        return ok(true);
      case "sendMessage":
        return this.sendMessage(payload);
      case "getFile":
        return this.getFile(payload);
      case "sendPhoto":
      case "sendDocument":
        return this.sendFile(method, payload);
      case "editMessageText":
        return this.editMessageText(payload);
      case "deleteMessage":
        return this.deleteMessage(payload);
      case "setMyCommands":
        this.registeredCommands =
          (payload.commands as { command: string; description: string }[]) ?? [];
        return ok(true);
      case "answerCallbackQuery":
        return this.answerCallbackQuery(payload);
      case "sendChatAction":
        return ok(true);
      default:
        return fail(404, "Not Found: method not found");
    }
  }

  private checkText(payload: Payload): { visible: string } | Reply {
    const text = typeof payload.text === "string" ? payload.text : String(payload.text ?? "");
    if (payload.chat_id === undefined) return fail(400, "Bad Request: chat_id is empty");
    if (text.trim() === "") return fail(400, "Bad Request: message text is empty");
    let visible = text;
    if (String(payload.parse_mode ?? "").toUpperCase() === "HTML") {
      const check = checkTelegramHtml(text);
      if (!check.ok) return fail(400, check.error);
      visible = check.text;
    }
    // Telegram counts the limit in UTF-16 code units of the text after entity parsing.
    if (utf16Length(visible) > 4096) return fail(400, "Bad Request: message is too long");
    return { visible };
  }

  private sendMessage(payload: Payload): Reply {
    const checked = this.checkText(payload);
    if ("status" in checked) return checked;
    const chatId = String(payload.chat_id);
    const messageId = this.allocateMessageId(chatId);
    const threadId =
      payload.message_thread_id === undefined ? undefined : Number(payload.message_thread_id);
    const replyParameters = payload.reply_parameters as { message_id?: unknown } | undefined;
    const replyTo = replyParameters?.message_id ?? payload.reply_to_message_id;
    const parseMode = payload.parse_mode === undefined ? undefined : String(payload.parse_mode);
    this.appendLog({
      messageId,
      chatId,
      threadId,
      from: "bot",
      text: checked.visible,
      rawText: String(payload.text),
      parseMode,
      replyToMessageId: replyTo === undefined ? undefined : Number(replyTo),
      edited: false,
      ...keyboardOf(payload),
      ...(keyboardOf(payload).buttons && { sentButtons: keyboardOf(payload).buttons }),
      earlier: [],
    });
    const message: Payload = {
      message_id: messageId,
      date: Math.floor(Date.now() / 1000),
      chat: this.chat(chatId),
      from: BOT_USER,
      text: checked.visible,
    };
    if (threadId !== undefined) message.message_thread_id = threadId;
    return ok(message);
  }

  private editMessageText(payload: Payload): Reply {
    const checked = this.checkText(payload);
    if ("status" in checked) return checked;
    const chatId = String(payload.chat_id);
    const entry = this.log
      .get(chatId)
      ?.find((e) => e.from === "bot" && e.messageId === Number(payload.message_id));
    if (!entry) return fail(400, "Bad Request: message to edit not found");
    if (entry.rawText === payload.text) {
      return fail(
        400,
        "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
      );
    }
    entry.earlier.push(entry.text);
    entry.text = checked.visible;
    entry.rawText = String(payload.text);
    entry.parseMode = payload.parse_mode === undefined ? undefined : String(payload.parse_mode);
    entry.edited = true;
    entry.buttons = keyboardOf(payload).buttons;
    return ok({ message_id: entry.messageId, date: 0, chat: this.chat(chatId), text: entry.text });
  }

  private deleteMessage(payload: Payload): Reply {
    const chatId = String(payload.chat_id);
    const entries = this.log.get(chatId) ?? [];
    const index = entries.findIndex(
      (e) => e.from === "bot" && e.messageId === Number(payload.message_id),
    );
    if (index < 0) return fail(400, "Bad Request: message to delete not found");
    entries.splice(index, 1);
    return ok(true);
  }
}

/** The inline keyboard of a sendMessage/editMessageText payload, if any. */
function keyboardOf(payload: Payload): Pick<ChatLogEntry, "buttons"> {
  const markup = payload.reply_markup as { inline_keyboard?: ChatLogEntry["buttons"] } | undefined;
  return markup?.inline_keyboard ? { buttons: markup.inline_keyboard } : {};
}

function defaultDescription(spec: FailSpec): string {
  if (spec.error_code === 429) return `Too Many Requests: retry after ${spec.retry_after ?? 1}`;
  if (spec.error_code === 401) return "Unauthorized";
  if (spec.error_code === 409) return "Conflict: terminated by other getUpdates request";
  if (spec.error_code >= 500) return "Internal Server Error";
  return "Bad Request";
}
