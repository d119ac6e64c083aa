/**
 * The Cloud API webhook's wire format: the signature Meta puts on every POST, and the messages
 * and delivery statuses a payload carries. Pure functions; the adapter decides what to store.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type {
  AttachmentKind,
  ChatAddress,
  InboundAttachment,
  InboundMessage,
} from "../../contract/platform.js";

/**
 * True when `header` (`X-Hub-Signature-256: sha256=<hex>`) is the HMAC-SHA256 of the exact bytes
 * received, keyed with the app secret. Compared in constant time.
 */
export function signatureValid(
  rawBody: Buffer,
  header: string | undefined,
  appSecret: string,
): boolean {
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header?.trim() ?? "");
  if (!match) return false;
  const expected = createHmac("sha256", appSecret).update(rawBody).digest();
  return timingSafeEqual(expected, Buffer.from(match[1]!, "hex"));
}

/** The session key of a user's chat with the business number (`agent:main:whatsapp:dm:<wa_id>`). */
export function whatsappSessionKey(waId: string): string {
  return `agent:main:whatsapp:dm:${waId}`;
}

/** A message from the webhook, ready for the sink, or a press of an approval button. */
export type WhatsappItem =
  | { kind: "message"; inbound: InboundMessage }
  | {
      kind: "button";
      from: string;
      messageId: string;
      approvalId: string;
      decision: "approve" | "approve_session" | "deny";
    };

/** A delivery status Meta reports for a message the business sent. */
export interface WhatsappStatus {
  messageId: string;
  status: string;
  recipient: string;
  /** `biz_opaque_callback_data` sent with the message (Keel's outbox row and piece). */
  tag?: string;
  errors: { code: number; title: string; detail?: string }[];
}

interface MediaPart {
  id?: string;
  mime_type?: string;
  caption?: string;
  filename?: string;
  voice?: boolean;
}

interface WireMessage {
  from?: string;
  id?: string;
  type?: string;
  text?: { body?: string };
  image?: MediaPart;
  document?: MediaPart;
  audio?: MediaPart;
  video?: MediaPart;
  interactive?: { type?: string; button_reply?: { id?: string; title?: string } };
  button?: { text?: string; payload?: string };
}

interface WireValue {
  metadata?: { phone_number_id?: string };
  contacts?: { wa_id?: string; profile?: { name?: string } }[];
  messages?: WireMessage[];
  statuses?: {
    id?: string;
    status?: string;
    recipient_id?: string;
    biz_opaque_callback_data?: string;
    errors?: { code?: number; title?: string; error_data?: { details?: string } }[];
  }[];
}

export interface WebhookPayload {
  object?: string;
  entry?: { changes?: { field?: string; value?: WireValue }[] }[];
}

const DECISIONS = new Set(["approve", "approve_session", "deny"]);

/**
 * The messages (in payload order) and statuses addressed to `phoneNumberId`; changes for other
 * numbers of the same app, and message types Keel does not read (reactions, locations,
 * stickers), are left out.
 */
export function readWebhook(
  payload: WebhookPayload,
  phoneNumberId: string,
): { items: WhatsappItem[]; statuses: WhatsappStatus[] } {
  const items: WhatsappItem[] = [];
  const statuses: WhatsappStatus[] = [];
  if (payload.object !== "whatsapp_business_account") return { items, statuses };
  for (const entry of payload.entry ?? []) {
    for (const change of entry.changes ?? []) {
      const value = change.value;
      if (change.field !== "messages" || !value) continue;
      if (value.metadata?.phone_number_id !== phoneNumberId) continue;
      const names = new Map(
        (value.contacts ?? []).map((c) => [c.wa_id ?? "", c.profile?.name] as const),
      );
      for (const message of value.messages ?? []) {
        const item = readMessage(message, names);
        if (item) items.push(item);
      }
      for (const s of value.statuses ?? []) {
        if (!s.id || !s.status) continue;
        statuses.push({
          messageId: s.id,
          status: s.status,
          recipient: s.recipient_id ?? "",
          ...(s.biz_opaque_callback_data && { tag: s.biz_opaque_callback_data }),
          errors: (s.errors ?? []).map((e) => ({
            code: e.code ?? 0,
            title: e.title ?? "",
            ...(e.error_data?.details && { detail: e.error_data.details }),
          })),
        });
      }
    }
  }
  return { items, statuses };
}

function readMessage(
  message: WireMessage,
  names: Map<string, string | undefined>,
): WhatsappItem | null {
  const from = message.from;
  const id = message.id;
  if (!from || !id) return null;
  if (message.type === "interactive" && message.interactive?.type === "button_reply") {
    const [decision, approvalId] = splitOnce(message.interactive.button_reply?.id ?? "", ":");
    if (DECISIONS.has(decision) && approvalId) {
      return {
        kind: "button",
        from,
        messageId: id,
        approvalId,
        decision: decision as "approve" | "approve_session" | "deny",
      };
    }
    return null;
  }
  let text: string;
  const attachments: InboundAttachment[] = [];
  switch (message.type) {
    case "text":
      text = message.text?.body ?? "";
      break;
    case "button":
      text = message.button?.text ?? message.button?.payload ?? "";
      break;
    case "image":
    case "document":
    case "audio":
    case "video": {
      const part = message[message.type];
      if (!part?.id) return null;
      attachments.push(attachmentOf(message.type, part));
      text = part.caption ?? "";
      break;
    }
    default:
      return null;
  }
  const address: ChatAddress = { platform: "whatsapp", chatId: from, replyToMessageId: id };
  const name = names.get(from);
  return {
    kind: "message",
    inbound: {
      platform: "whatsapp",
      chatId: from,
      platformMessageId: id,
      sessionKey: whatsappSessionKey(from),
      text,
      senderId: from,
      ...(name && { senderName: name }),
      address,
      ...(attachments.length > 0 && { attachments }),
    },
  };
}

function attachmentOf(
  type: "image" | "document" | "audio" | "video",
  part: MediaPart,
): InboundAttachment {
  const kind: AttachmentKind =
    type === "image" ? "photo" : type === "audio" ? (part.voice ? "voice" : "audio") : "document";
  return {
    kind,
    ref: part.id!,
    ...(part.filename && { name: part.filename }),
    ...(part.mime_type && { mime: part.mime_type.split(";")[0]!.trim() }),
  };
}

function splitOnce(value: string, separator: string): [string, string] {
  const at = value.indexOf(separator);
  return at < 0 ? [value, ""] : [value.slice(0, at), value.slice(at + 1)];
}
