/**
 * Matrix through the client-server API (client.ts): a `/sync` long poll in, `PUT
 * /rooms/{room}/send` out. The sync position (`next_batch`) is stored durably, and only after
 * every message of the batch before it is committed to the inbox: a crash before that syncs the
 * same batch again, and the inbox's key (room + event id) stores each message once.
 *
 * Rooms: a room with two members is a direct chat, answered throughout; in a larger room Keel
 * answers when mentioned. Invites from allowed users are accepted. End-to-end encrypted rooms are
 * not supported: an encrypted message gets one plain notice saying so, per room and process.
 */
import type { Logger } from "pino";
import {
  type AttachmentKind,
  type ChatAddress,
  FileTooLargeError,
  type InboundAttachment,
  type InboundMessage,
  type InboundSink,
  type OutboundReply,
  type PlatformAdapter,
} from "../../contract/platform.js";
import type { Store } from "../../sessions/store.js";
import { ChatAccess, type PairingAccess } from "../chat-access.js";
import {
  ConnectionState,
  type LeasedAdapterOptions,
  type SessionProgress,
} from "../kit/connection-state.js";
import { missingSetting } from "../kit/missing-setting.js";
import type { ProgressSettings, ProgressView } from "../progress-view.js";
import { splitText } from "../text-pieces.js";
import { typingSchedule } from "../typing.js";
import { MatrixClient, MatrixError, type MatrixEvent, type SyncResponse } from "./client.js";
import { createMatrixProgress, MATRIX_PIECE_CHARS } from "./progress.js";

export type MatrixStoreAccess = PairingAccess &
  Pick<Store, "getPlatformState" | "setPlatformState">;

export interface MatrixTiming {
  /** How long one `/sync` waits on the server for news. */
  pollTimeoutMs: number;
  requestTimeoutMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  startWaitMs: number;
  maxAttempts: number;
  maxRetryWaitMs: number;
  typingDelayMs: number;
  typingEveryMs: number;
}

export const DEFAULT_MATRIX_TIMING: MatrixTiming = {
  pollTimeoutMs: 30_000,
  requestTimeoutMs: 30_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  startWaitMs: 10_000,
  maxAttempts: 5,
  maxRetryWaitMs: 120_000,
  typingDelayMs: 1_000,
  typingEveryMs: 20_000,
};

export interface MatrixAdapterOptions extends LeasedAdapterOptions<ProgressSettings> {
  homeserver: string | undefined;
  userId: string | undefined;
  accessToken: string | undefined;
  allowedUsers: string[];
  adminUsers: string[];
  store: MatrixStoreAccess;
  timing?: Partial<MatrixTiming>;
}

export const ENCRYPTED_NOTICE =
  "This room is end-to-end encrypted, and Keel does not support encrypted rooms yet: I cannot read messages here. Talk to me in an unencrypted room.";

export function matrixSessionKey(roomId: string): string {
  return `agent:main:matrix:room:${roomId}`;
}

export class MatrixAdapter implements PlatformAdapter {
  readonly name = "matrix";
  private readonly logger: Logger;
  private readonly timing: MatrixTiming;
  private readonly health: ConnectionState;
  private readonly access: ChatAccess;
  private readonly client: MatrixClient | null;
  private readonly progressView: ProgressView | null;
  private sink: InboundSink | null = null;
  /** Per room: a direct chat (two members)? Asked once per room and process. */
  private readonly direct = new Map<string, boolean>();
  private readonly toldEncrypted = new Set<string>();

  constructor(private readonly options: MatrixAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_MATRIX_TIMING, ...options.timing };
    // A long poll answers at least every pollTimeoutMs: longer silence is a stall (a standby
    // holds no poll, so it is never stalled).
    const pollMs = this.timing.pollTimeoutMs + this.timing.requestTimeoutMs;
    this.health = new ConnectionState("matrix", options, this.timing, {
      stalledAfterMs: options.connection ? undefined : 2 * pollMs,
      crashLog: "matrix sync loop crashed",
      crashStatus: (err) => `Matrix stopped unexpectedly: ${describe(err)}`,
    });
    this.access = new ChatAccess("matrix", options.allowedUsers, options.store, options.adminUsers);
    this.client =
      options.homeserver && options.accessToken
        ? new MatrixClient({
            homeserver: options.homeserver,
            accessToken: options.accessToken,
            requestTimeoutMs: this.timing.requestTimeoutMs,
            maxAttempts: this.timing.maxAttempts,
            maxWaitMs: this.timing.maxRetryWaitMs,
            signal: this.health.stopSignal,
          })
        : null;
    this.progressView =
      this.client && options.progress
        ? createMatrixProgress(
            this.client,
            { ...options.progress, logger: this.logger, signal: this.health.stopSignal },
            (reply) => this.sendPlainReply(reply),
          )
        : null;
  }

  /** Shows a running turn's reply as it is written, edited in place (progress.ts). */
  readonly progress: PlatformAdapter["progress"] = (update) =>
    this.progressView?.onProgress(update);

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

  private get sinceKey(): string {
    return `matrix:since:${this.options.userId}`;
  }

  async start(sink: InboundSink): Promise<void> {
    this.sink ??= sink;
    const missing = missingSetting(this.options, {
      homeserver: "platforms.matrix.homeserver (MATRIX_HOMESERVER)",
      userId: "platforms.matrix.user_id (MATRIX_USER_ID)",
      accessToken: "platforms.matrix.access_token (MATRIX_ACCESS_TOKEN)",
    });
    await this.health.start(
      (attempted) => this.run(attempted),
      missing && `${missing} is not set; Matrix needs it.`,
    );
  }

  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    await this.health.loop;
    await this.options.connection?.release();
    await this.progressView?.stop();
    this.health.set("stopped");
    this.logger.info("matrix stopped");
  }

  /** Delivers a reply: into the turn's streamed messages when it had any, else as new messages. */
  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.client) throw new Error("Matrix is not configured; the reply stays queued.");
    if (reply.file) return this.sendFile(reply);
    await (this.progressView ? this.progressView.deliver(reply) : this.sendPlainReply(reply));
  }

  /** A file the agent sent: uploaded to the media repository, then sent as an image or a file. */
  private async sendFile(reply: OutboundReply): Promise<void> {
    const file = reply.file!;
    const { readFile } = await import("node:fs/promises");
    const uri = await this.client!.upload(await readFile(file.path), file.mime, file.name);
    const image = file.mime.startsWith("image/");
    await this.client!.send(reply.address.chatId, `keel-${reply.outboxId}-file`, {
      msgtype: image ? "m.image" : "m.file",
      // A caption rides in `body` when `filename` names the file (spec 1.10).
      body: reply.text || file.name,
      filename: file.name,
      url: uri,
      info: { mimetype: file.mime, size: file.size },
    });
  }

  /** A file a user sent (`mxc://`), downloaded from the media repository with the token. */
  async fetchFile(
    attachment: InboundAttachment,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    if (!this.client) throw new Error("Matrix is not configured.");
    if (attachment.size !== undefined && attachment.size > maxBytes) {
      throw new FileTooLargeError(maxBytes, attachment.size);
    }
    const { bytes, tooLarge } = await this.client.download(attachment.ref, maxBytes, signal);
    if (tooLarge) throw new FileTooLargeError(maxBytes);
    return bytes;
  }

  /** Sends a reply's pieces; each transaction id names the outbox row and piece. */
  private async sendPlainReply(reply: OutboundReply): Promise<void> {
    if (!this.client) throw new Error("Matrix is not configured; the reply stays queued.");
    const pieces = splitText(reply.text, MATRIX_PIECE_CHARS);
    for (const [piece, body] of pieces.entries()) {
      await this.client.send(reply.address.chatId, `keel-${reply.outboxId}-${piece}`, {
        msgtype: reply.kind === "notice" ? "m.notice" : "m.text",
        body,
      });
    }
  }

  showTyping(address: ChatAddress): () => void {
    const client = this.client;
    const userId = this.options.userId;
    if (!client || !userId) return () => {};
    let shown = false;
    const stop = typingSchedule(
      () => {
        shown = true;
        client
          .typing(address.chatId, userId, true, this.timing.typingEveryMs + 10_000)
          .catch((err: unknown) => this.logger.debug({ err }, "matrix typing not shown"));
      },
      this.timing.typingDelayMs,
      this.timing.typingEveryMs,
    );
    return () => {
      stop();
      if (shown && !this.health.stopped) {
        client.typing(address.chatId, userId, false, 0).catch(() => {});
      }
    };
  }

  /** Syncs while this gateway holds the account (always, alone); stands by while another does. */
  private run(firstAttempt: () => void): Promise<void> {
    let checked = false;
    return this.health.keepConnected(
      {
        // One /sync per account: two syncing gateways would both take every batch. The others
        // stand by and take over from the stored position.
        lease: this.options.connection,
        takenLog: "matrix sync taken: syncing from the stored position",
        session: async (held, progress) => {
          if (!checked) {
            await this.checkAccount();
            checked = true;
          }
          await this.syncWhileHeld(held, progress);
        },
        fatal: (err) => this.fatal(err),
        retryStatus: (err) =>
          `Cannot sync with the Matrix homeserver (${describe(err)}); retrying.`,
      },
      firstAttempt,
    );
  }

  /** Syncs batch after batch until the hold is lost, storing the position after each. */
  private async syncWhileHeld(held: AbortSignal, progress: SessionProgress): Promise<void> {
    // Read at every hold: another gateway may have moved it on meanwhile.
    let since = await this.startingPosition(held);
    while (!held.aborted) {
      if (this.health.state !== "connected") {
        // Previews an earlier process left mid-stream (a crash) are marked interrupted.
        void this.progressView?.sweep();
      }
      progress.connected();
      const batch = await this.client!.sync(since, this.timing.pollTimeoutMs, held);
      this.health.sawEvent();
      await this.takeBatch(batch);
      // Only now: a crash before this line syncs the same batch again.
      await this.options.store.setPlatformState(this.sinceKey, batch.next_batch);
      since = batch.next_batch;
      progress.healthy();
    }
    if (!this.health.stopped) this.logger.warn("matrix sync handed over; standing by");
  }

  private async checkAccount(): Promise<void> {
    const me = await this.client!.whoami();
    if (me.user_id !== this.options.userId) {
      throw new WrongAccountError(
        `The Matrix access token belongs to ${me.user_id}, not platforms.matrix.user_id ${this.options.userId}.`,
      );
    }
  }

  /** The stored sync position; on the very first start, now (earlier history is not answered). */
  private async startingPosition(signal: AbortSignal): Promise<string> {
    const stored = (await this.options.store.getPlatformState(this.sinceKey)) as string | null;
    if (stored !== null) return stored;
    const first = await this.client!.sync(null, 0, signal);
    await this.takeInvites(first);
    await this.options.store.setPlatformState(this.sinceKey, first.next_batch);
    return first.next_batch;
  }

  /** A rejected token or another account's: said, and no retry. */
  private fatal(err: unknown): boolean {
    if (err instanceof MatrixError && (err.status === 401 || err.errcode === "M_UNKNOWN_TOKEN")) {
      this.health.fail(
        `Matrix rejected the access token (${err.message}). Check platforms.matrix.access_token (MATRIX_ACCESS_TOKEN), then restart Keel.`,
        { retrying: false },
      );
      return true;
    }
    if (err instanceof WrongAccountError) {
      this.health.fail(err.message, { retrying: false });
      return true;
    }
    return false;
  }

  private async takeInvites(batch: SyncResponse): Promise<void> {
    for (const [roomId, room] of Object.entries(batch.rooms?.invite ?? {})) {
      const invite = room.invite_state?.events?.find(
        (e) => e.type === "m.room.member" && e.state_key === this.options.userId,
      );
      const inviter = invite?.sender;
      if (!inviter || !(await this.access.isAllowed(inviter))) continue;
      try {
        await this.client!.join(roomId);
        this.logger.info({ roomId, inviter }, "matrix invite accepted");
      } catch (err) {
        this.logger.warn({ roomId, error: describe(err) }, "matrix invite not accepted");
      }
    }
  }

  /** Every message of the batch, room by room in order, then the invites. Throws when one is not stored. */
  private async takeBatch(batch: SyncResponse): Promise<void> {
    for (const [roomId, room] of Object.entries(batch.rooms?.join ?? {})) {
      for (const event of room.timeline?.events ?? []) await this.takeEvent(roomId, event);
    }
    await this.takeInvites(batch);
  }

  private async takeEvent(roomId: string, event: MatrixEvent): Promise<void> {
    if (event.sender === this.options.userId) return;
    if (event.type === "m.room.encrypted") {
      if (!this.toldEncrypted.has(roomId)) {
        this.toldEncrypted.add(roomId);
        await this.client!.send(roomId, `keel-e2e-${event.event_id}`, {
          msgtype: "m.notice",
          body: ENCRYPTED_NOTICE,
        }).catch((err: unknown) =>
          this.logger.warn({ error: describe(err) }, "matrix notice not sent"),
        );
      }
      return;
    }
    if (event.type !== "m.room.message") return;
    const content = event.content as MessageContent;
    // Edits and other bots' notices are not new messages.
    if (content["m.relates_to"]?.rel_type === "m.replace") return;
    if (typeof content.body !== "string") return;
    const attachment = attachmentOf(content);
    if (content.msgtype !== "m.text" && !attachment) return;
    const userId = this.options.userId!;
    const direct = await this.isDirect(roomId);
    const mentioned =
      content["m.mentions"]?.user_ids?.includes(userId) === true || content.body.includes(userId);
    if (!direct && !mentioned) return;
    // A file's body is its name, unless `filename` names it and the body is a caption.
    const said = attachment && !content.filename ? "" : content.body;
    const text = said
      .replaceAll(userId, "")
      .replace(/^[\s:,]+/, "")
      .trim();
    const inbound: InboundMessage = {
      platform: "matrix",
      chatId: roomId,
      platformMessageId: event.event_id,
      sessionKey: matrixSessionKey(roomId),
      text,
      senderId: event.sender,
      address: { platform: "matrix", chatId: roomId, replyToMessageId: event.event_id },
      ...(attachment && { attachments: [attachment] }),
    };
    if (await this.access.isAllowed(event.sender)) {
      if (this.access.isOperator(event.sender)) inbound.operator = true;
      await this.sink!.receive(inbound);
      return;
    }
    if (!direct) return;
    const answer = await this.access.pairingAnswer({
      userId: event.sender,
      userName: null,
      chatId: roomId,
    });
    this.logger.info({ userId: event.sender }, "matrix pairing requested");
    await this.client!.send(roomId, `keel-pair-${event.event_id}`, {
      msgtype: "m.notice",
      body: answer,
    });
  }

  private async isDirect(roomId: string): Promise<boolean> {
    const known = this.direct.get(roomId);
    if (known !== undefined) return known;
    const members = await this.client!.joinedMembers(roomId);
    const direct = members.length <= 2;
    this.direct.set(roomId, direct);
    return direct;
  }
}

interface MessageContent {
  msgtype?: string;
  body?: string;
  filename?: string;
  url?: string;
  info?: { mimetype?: string; size?: number };
  "m.relates_to"?: { rel_type?: string };
  "m.mentions"?: { user_ids?: string[] };
}

const MEDIA_KINDS: Record<string, AttachmentKind> = {
  "m.image": "photo",
  "m.file": "document",
  "m.audio": "audio",
  "m.video": "document",
};

/** An unencrypted file event's media (`url`: an `mxc://` URI), or null. */
function attachmentOf(content: MessageContent): InboundAttachment | null {
  const kind = content.msgtype ? MEDIA_KINDS[content.msgtype] : undefined;
  if (!kind || typeof content.url !== "string" || !content.url.startsWith("mxc://")) return null;
  const name = content.filename ?? content.body;
  return {
    kind,
    ref: content.url,
    ...(name && { name }),
    ...(content.info?.mimetype && { mime: content.info.mimetype }),
    ...(typeof content.info?.size === "number" && { size: content.info.size }),
  };
}

/** The token is another account's: no retry fixes that. */
class WrongAccountError extends Error {}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
