/**
 * WhatsApp through Meta's Cloud API: messages come in on a webhook (`POST
 * /platforms/whatsapp/webhook`), replies go out through the Graph API. The webhook answers 200
 * only once every message of the POST is committed to the inbox: any other answer makes Meta
 * deliver the POST again, and the inbox's key (sender + message id) stores a redelivery once.
 * A POST without a valid `X-Hub-Signature-256` is refused (401) before anything is read.
 *
 * Liveness: a webhook platform is silent while nobody writes, so silence is not a stall. What
 * is checked instead is that Keel can still act on WhatsApp: a cheap authenticated Graph call
 * (the phone number's record) at start and every `probeEveryMs`; a refused token marks the
 * platform down, an unreachable API reconnecting, and the next good answer connected again.
 */
import { Hono } from "hono";
import type { Logger } from "pino";
import {
  type ChatAddress,
  FileTooLargeError,
  type InboundAttachment,
  type InboundSink,
  type OutboundReply,
  type PlatformAdapter,
} from "../../contract/platform.js";
import type { AppEnv } from "../../control/http-server.js";
import { ChatAccess, type PairingAccess } from "../chat-access.js";
import { type ConnectingAdapterOptions, ConnectionState } from "../kit/connection-state.js";
import { missingSetting } from "../kit/missing-setting.js";
import { typingSchedule } from "../typing.js";
import { splitWhatsappText, toWhatsappText, WHATSAPP_BUTTON_BODY_LIMIT } from "./format.js";
import { AUTH_ERROR_CODE, GraphClient, GraphError, OUTSIDE_WINDOW_CODE } from "./graph.js";
import { readWebhook, signatureValid, type WebhookPayload, type WhatsappItem } from "./webhook.js";

export const WHATSAPP_WEBHOOK_PATH = "/platforms/whatsapp/webhook";

export interface WhatsappTiming {
  /** How often the Graph API is asked whether the token still works. */
  probeEveryMs: number;
  requestTimeoutMs: number;
  /** Rate-limited sends: attempts, the longest wait honoured, and the backoff without Retry-After. */
  maxAttempts: number;
  maxRetryWaitMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** "typing…": not for a turn answered within the delay; renewed before WhatsApp's 25 s end. */
  typingDelayMs: number;
  typingEveryMs: number;
}

export const DEFAULT_WHATSAPP_TIMING: WhatsappTiming = {
  probeEveryMs: 300_000,
  requestTimeoutMs: 30_000,
  maxAttempts: 5,
  maxRetryWaitMs: 120_000,
  backoffBaseMs: 1_000,
  backoffMaxMs: 60_000,
  typingDelayMs: 1_000,
  typingEveryMs: 20_000,
};

export interface WhatsappAdapterOptions extends ConnectingAdapterOptions<unknown> {
  phoneNumberId: string | undefined;
  accessToken: string | undefined;
  appSecret: string | undefined;
  verifyToken: string | undefined;
  apiRoot: string;
  allowedUsers: string[];
  adminUsers: string[];
  store: PairingAccess;
  timing?: Partial<WhatsappTiming>;
}

/** Cloud API media limits (bytes) for what Keel sends; anything else goes as a document. */
const IMAGE_MAX = 5 * 1_048_576;
const DOCUMENT_MAX = 100 * 1_048_576;
const IMAGE_TYPES = new Set(["image/jpeg", "image/png"]);

export class WhatsappAdapter implements PlatformAdapter {
  readonly name = "whatsapp";
  private readonly logger: Logger;
  private readonly timing: WhatsappTiming;
  private readonly health: ConnectionState;
  private readonly access: ChatAccess;
  private readonly graph: GraphClient | null;
  private sink: InboundSink | null = null;
  private probing: Promise<void> | null = null;
  /** Per sender, the intake before: one chat's messages are stored in the order they came. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Per chat, the user's latest message: the typing indicator is tied to one. */
  private readonly lastMessage = new Map<string, string>();
  /** Pieces of a reply already sent by this process: a retried row does not send them again. */
  private readonly sentPieces = new Map<number, number>();

  constructor(private readonly options: WhatsappAdapterOptions) {
    this.logger = options.logger;
    this.timing = { ...DEFAULT_WHATSAPP_TIMING, ...options.timing };
    // Not `stalledAfterMs`: nobody writing is no sign of trouble on a webhook.
    this.health = new ConnectionState("whatsapp", options, this.timing);
    this.access = new ChatAccess(
      "whatsapp",
      options.allowedUsers,
      options.store,
      options.adminUsers,
    );
    this.graph =
      options.phoneNumberId && options.accessToken
        ? new GraphClient({
            apiRoot: options.apiRoot,
            phoneNumberId: options.phoneNumberId,
            accessToken: options.accessToken,
            requestTimeoutMs: this.timing.requestTimeoutMs,
            retry: {
              maxAttempts: this.timing.maxAttempts,
              maxWaitMs: this.timing.maxRetryWaitMs,
              backoffMs: (attempt) => this.health.backoffMs(attempt),
            },
            signal: this.health.stopSignal,
          })
        : null;
  }

  readonly status = () => this.health.status();
  readonly connection = () => this.health.report();

  /** The webhook: Meta's GET handshake and the signed POSTs. Mounted by the gateway. */
  routes(): Hono<AppEnv> {
    const app = new Hono<AppEnv>();
    app.get(WHATSAPP_WEBHOOK_PATH, (c) => {
      const mode = c.req.query("hub.mode");
      const token = c.req.query("hub.verify_token");
      const challenge = c.req.query("hub.challenge") ?? "";
      const expected = this.options.verifyToken;
      if (mode !== "subscribe" || !expected || token !== expected) {
        this.logger.warn({ mode }, "whatsapp webhook handshake refused: wrong verify token");
        return c.text("Forbidden", 403);
      }
      this.logger.info("whatsapp webhook verified by Meta");
      return c.text(challenge, 200);
    });
    app.post(WHATSAPP_WEBHOOK_PATH, async (c) => {
      const raw = Buffer.from(await c.req.arrayBuffer());
      const secret = this.options.appSecret;
      if (!secret || !signatureValid(raw, c.req.header("x-hub-signature-256"), secret)) {
        this.logger.warn("whatsapp webhook refused: bad or missing X-Hub-Signature-256");
        return c.text("Unauthorized", 401);
      }
      // Stopping (or not started): Meta delivers it again later, to this or the next process.
      if (!this.sink || this.health.stopped) return c.text("Unavailable", 503);
      let payload: WebhookPayload;
      try {
        payload = JSON.parse(raw.toString("utf8")) as WebhookPayload;
      } catch {
        return c.text("Bad Request", 400);
      }
      this.health.sawEvent();
      try {
        await this.takePayload(payload);
      } catch (err) {
        this.logger.error({ err }, "whatsapp webhook not stored; Meta will deliver it again");
        return c.text("Not stored", 500);
      }
      return c.text("OK", 200);
    });
    return app;
  }

  /** Checks the token, then keeps checking it in the background; never throws. */
  async start(sink: InboundSink): Promise<void> {
    if (this.sink || this.health.stopped) return;
    this.sink = sink;
    const missing = missingSetting(this.options, {
      phoneNumberId: "platforms.whatsapp.phone_number_id (WHATSAPP_PHONE_NUMBER_ID)",
      accessToken: "platforms.whatsapp.access_token (WHATSAPP_ACCESS_TOKEN)",
      appSecret: "platforms.whatsapp.app_secret (WHATSAPP_APP_SECRET)",
      verifyToken: "platforms.whatsapp.verify_token (WHATSAPP_VERIFY_TOKEN)",
    });
    if (missing) {
      this.health.fail(`${missing} is not set; WhatsApp needs it.`, { retrying: false });
      return;
    }
    this.health.set("starting");
    await this.probe();
    this.probing = this.probeLoop();
  }

  async stop(): Promise<void> {
    if (this.health.stopped) return;
    this.health.stop();
    await this.probing;
    this.health.set("stopped");
    this.logger.info("whatsapp stopped");
  }

  /** Sends a reply's pieces (or its file, or its approval buttons); throws when WhatsApp refused. */
  async deliver(reply: OutboundReply): Promise<void> {
    if (!this.graph) throw new Error("WhatsApp is not configured; the reply stays queued.");
    const to = reply.address.chatId;
    const tag = (piece: number) => `keel-outbox:${reply.outboxId}:${piece}`;
    try {
      if (reply.file) {
        await this.sendFile(to, reply, tag(0));
      } else if (reply.approvalId) {
        await this.sendApproval(to, reply, tag);
      } else {
        const pieces = splitWhatsappText(toWhatsappText(reply.text));
        await this.sendPieces(reply.outboxId, to, pieces, tag);
      }
      this.sentPieces.delete(reply.outboxId);
    } catch (err) {
      if (err instanceof GraphError && err.code === OUTSIDE_WINDOW_CODE) {
        // Only a template may reach a user silent for 24 hours: said plainly, never dropped quietly.
        throw new Error(
          `WhatsApp refused the reply to ${to}: the user last wrote more than 24 hours ago, and outside that window only template messages are allowed (${err.message})`,
        );
      }
      throw err;
    }
  }

  /** "typing…" on the user's latest message, which also marks it read. */
  showTyping(address: ChatAddress): () => void {
    const graph = this.graph;
    if (!graph) return () => {};
    return typingSchedule(
      () => {
        const messageId = this.lastMessage.get(address.chatId);
        if (!messageId || this.health.stopped) return;
        graph.markRead(messageId, true).catch((err: unknown) => {
          this.logger.debug({ err }, "whatsapp typing indicator not shown");
        });
      },
      this.timing.typingDelayMs,
      this.timing.typingEveryMs,
    );
  }

  /** Media a user sent: its id gives a short-lived URL, which gives the bytes (both with the token). */
  async fetchFile(
    attachment: InboundAttachment,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    if (!this.graph) throw new Error("WhatsApp is not configured.");
    const info = await this.graph.mediaInfo(attachment.ref);
    if (info.size !== null && info.size > maxBytes)
      throw new FileTooLargeError(maxBytes, info.size);
    const { bytes, tooLarge } = await this.graph.download(info.url, maxBytes, signal);
    if (tooLarge) throw new FileTooLargeError(maxBytes);
    return bytes;
  }

  private async probeLoop(): Promise<void> {
    for (let failures = 0; !this.health.stopped; ) {
      const wait =
        this.health.state === "connected"
          ? this.timing.probeEveryMs
          : this.health.backoffMs(Math.max(1, failures));
      await this.health.pause(wait);
      if (this.health.stopped) return;
      await this.probe();
      failures = this.health.state === "connected" ? 0 : failures + 1;
    }
  }

  private async probe(): Promise<void> {
    try {
      const { displayPhoneNumber } = await this.graph!.probe();
      if (this.health.state !== "connected") {
        this.logger.info({ number: displayPhoneNumber }, "whatsapp connected");
      }
      this.health.set("connected");
      this.health.sawEvent();
    } catch (err) {
      if (this.health.stopped) return;
      if (err instanceof GraphError && (err.code === AUTH_ERROR_CODE || err.status === 401)) {
        this.health.fail(
          `WhatsApp rejected the access token (${err.message}). Check platforms.whatsapp.access_token (WHATSAPP_ACCESS_TOKEN) and phone_number_id.`,
          { retrying: false },
        );
        return;
      }
      this.health.fail(`Cannot reach the WhatsApp Graph API (${describe(err)}); retrying.`);
    }
  }

  /** Every message of one POST, each after the one before from the same sender. */
  private async takePayload(payload: WebhookPayload): Promise<void> {
    const { items, statuses } = readWebhook(payload, this.options.phoneNumberId ?? "");
    for (const status of statuses) {
      if (status.status === "failed") {
        this.logger.warn(
          {
            message: status.messageId,
            to: status.recipient,
            tag: status.tag,
            errors: status.errors,
          },
          "whatsapp reports a message was not delivered",
        );
      }
    }
    const bySender = new Map<string, WhatsappItem[]>();
    for (const item of items) {
      const from = item.kind === "message" ? item.inbound.chatId : item.from;
      bySender.set(from, [...(bySender.get(from) ?? []), item]);
    }
    await Promise.all(
      [...bySender].map(([from, list]) =>
        this.chained(from, async () => {
          for (const item of list) await this.take(item);
        }),
      ),
    );
  }

  /** Runs `work` after the sender's earlier intake; a failure there does not block this one. */
  private chained(from: string, work: () => Promise<void>): Promise<void> {
    const before = this.chains.get(from) ?? Promise.resolve();
    const next = before.catch(() => {}).then(work);
    this.chains.set(from, next);
    void next
      .finally(() => {
        if (this.chains.get(from) === next) this.chains.delete(from);
      })
      .catch(() => {});
    return next;
  }

  /** Access, then the sink (or a pairing code for a stranger); read receipts only after a commit. */
  private async take(item: WhatsappItem): Promise<void> {
    const userId = item.kind === "message" ? item.inbound.chatId : item.from;
    if (!(await this.access.isAllowed(userId))) {
      const text = await this.access.pairingAnswer({ userId, userName: null, chatId: userId });
      this.logger.info({ userId }, "whatsapp pairing requested");
      await this.sendPlain(userId, text);
      return;
    }
    const operator = this.access.isOperator(userId);
    if (item.kind === "button") {
      await this.press(item, operator);
      return;
    }
    const { inbound } = item;
    if (operator) inbound.operator = true;
    await this.sink!.receive(inbound);
    this.lastMessage.set(inbound.chatId, inbound.platformMessageId);
    this.graph?.markRead(inbound.platformMessageId, false).catch((err: unknown) => {
      this.logger.debug({ err }, "whatsapp read receipt not sent");
    });
  }

  /** An approval button: decided through the sink, the outcome said in the chat (no card edits). */
  private async press(
    item: Extract<WhatsappItem, { kind: "button" }>,
    operator: boolean,
  ): Promise<void> {
    const answer = this.sink!.answerApproval;
    if (!answer) return;
    const result = await answer.call(this.sink, {
      approvalId: item.approvalId,
      decision: item.decision,
      platform: "whatsapp",
      userId: item.from,
      operator,
      chatId: item.from,
    });
    await this.sendPlain(item.from, result.cardText ?? result.toast).catch((err: unknown) => {
      this.logger.warn({ error: describe(err) }, "whatsapp approval answer not delivered");
    });
  }

  private async sendPlain(to: string, text: string): Promise<void> {
    if (!this.graph) throw new Error("WhatsApp is not configured.");
    for (const piece of splitWhatsappText(text)) {
      await this.graph.sendMessage({ to, type: "text", text: { body: piece } });
    }
  }

  private async sendPieces(
    outboxId: number,
    to: string,
    pieces: string[],
    tag: (piece: number) => string,
  ): Promise<void> {
    for (let piece = this.sentPieces.get(outboxId) ?? 0; piece < pieces.length; piece++) {
      await this.graph!.sendMessage({
        to,
        type: "text",
        text: { body: pieces[piece], preview_url: false },
        biz_opaque_callback_data: tag(piece),
      });
      this.sentPieces.set(outboxId, piece + 1);
    }
  }

  /** The question with three reply buttons; a question too long for a button body goes first as text. */
  private async sendApproval(
    to: string,
    reply: OutboundReply,
    tag: (piece: number) => string,
  ): Promise<void> {
    const text = toWhatsappText(reply.text);
    const id = reply.approvalId!;
    let body = text;
    if (Array.from(text).length > WHATSAPP_BUTTON_BODY_LIMIT) {
      await this.sendPieces(reply.outboxId, to, splitWhatsappText(text), tag);
      body = "Approve this tool call?";
    }
    await this.graph!.sendMessage({
      to,
      type: "interactive",
      interactive: {
        type: "button",
        body: { text: body },
        action: {
          buttons: [
            { type: "reply", reply: { id: `approve:${id}`, title: "Approve" } },
            { type: "reply", reply: { id: `approve_session:${id}`, title: "Allow for session" } },
            { type: "reply", reply: { id: `deny:${id}`, title: "Deny" } },
          ],
        },
      },
      biz_opaque_callback_data: tag(99),
    });
  }

  /** A file the agent sent: uploaded, then sent by media id, within WhatsApp's size limits. */
  private async sendFile(to: string, reply: OutboundReply, tag: string): Promise<void> {
    const file = reply.file!;
    const asImage = IMAGE_TYPES.has(file.mime) && file.size <= IMAGE_MAX;
    if (!asImage && file.size > DOCUMENT_MAX) {
      await this.sendPlain(
        to,
        `I could not send ${file.name}: it is larger than WhatsApp's 100 MB limit for documents.`,
      );
      return;
    }
    const { readFile } = await import("node:fs/promises");
    const mediaId = await this.graph!.upload(await readFile(file.path), file.mime, file.name);
    const caption = reply.text ? { caption: toWhatsappText(reply.text).slice(0, 1024) } : {};
    await this.graph!.sendMessage({
      to,
      ...(asImage
        ? { type: "image", image: { id: mediaId, ...caption } }
        : { type: "document", document: { id: mediaId, filename: file.name, ...caption } }),
      biz_opaque_callback_data: tag,
    });
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
