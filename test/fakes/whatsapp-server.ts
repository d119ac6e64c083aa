/**
 * A stand-in for Meta's side of WhatsApp on 127.0.0.1: the Graph API endpoints Keel calls (the
 * phone number's record, `/messages`, media info, download and upload), and the webhook sender
 * that POSTs signed Cloud API payloads to a gateway, as Meta does, remembering each answer.
 */
import { createHmac } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

const VERSION = "v21.0";

export interface GraphCall {
  method: string;
  path: string;
  body: Record<string, unknown>;
  at: number;
  /** The HTTP status the stand-in answered with. */
  status: number;
}

/** One webhook POST Keel was sent, and what it answered (null while the answer is pending). */
export interface WebhookDelivery {
  body: string;
  status: number | null;
}

export interface FakeWhatsapp {
  apiRoot: string;
  phoneNumberId: string;
  accessToken: string;
  appSecret: string;
  calls: GraphCall[];
  /** Where webhooks go (the gateway's `/platforms/whatsapp/webhook`); set once it listens. */
  webhookUrl: string | null;
  /** The user writes; returns the delivery and the message id. */
  userSends(input: { from: string; text?: string; name?: string; media?: MediaInput }): {
    id: string;
    delivery: WebhookDelivery;
  };
  /** The user presses a reply button whose id is `buttonId`. */
  userPresses(from: string, buttonId: string): WebhookDelivery;
  /** Every webhook POST so far (a retry updates its delivery's status). */
  deliveries: WebhookDelivery[];
  /** As Meta does: POSTs again every delivery that was answered with anything but 200. */
  retryUnanswered(): number;
  /** POSTs a payload again (a redelivery), or any body with any signature. */
  post(body: string, signature?: string): WebhookDelivery;
  /** The next `/messages` send (not a read receipt) is refused with HTTP 429 and Retry-After. */
  rateLimitNext(seconds: number): void;
  /** A `/messages` send (the next, or the one after `after` more) is refused with this Graph error code (HTTP 400). */
  failNext(code: number, message: string, after?: number): void;
  /** Media the user can send: bytes served by id. */
  addMedia(id: string, bytes: Buffer, mime: string): void;
  uploads: { mime: string; bytes: Buffer; name: string }[];
  /** Calls `listener` with every call Keel makes from now on (when answered); returns the unsubscribe. */
  onCall(listener: (call: GraphCall) => void): () => void;
  /** Text (or interactive body) of every message Keel sent to `to`, oldest first. */
  botTexts(to: string): string[];
  close(): Promise<void>;
}

interface MediaInput {
  type: "image" | "document" | "audio";
  id: string;
  mime: string;
  caption?: string;
  filename?: string;
}

export async function startFakeWhatsapp(
  options: { phoneNumberId?: string; accessToken?: string; appSecret?: string } = {},
): Promise<FakeWhatsapp> {
  const phoneNumberId = options.phoneNumberId ?? "1098765432";
  const accessToken = options.accessToken ?? "EAAG-fake-token";
  const appSecret = options.appSecret ?? "fake-app-secret";
  const calls: GraphCall[] = [];
  const listeners = new Set<(call: GraphCall) => void>();
  const media = new Map<string, { bytes: Buffer; mime: string }>();
  const uploads: FakeWhatsapp["uploads"] = [];
  const pending: {
    status: number;
    headers: Record<string, string>;
    body: unknown;
    /** Sends let through before this refusal. */
    after: number;
  }[] = [];
  let sent = 0;
  let received = 0;

  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const apiRoot = `http://127.0.0.1:${port}/`;

  function reply(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  async function readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", apiRoot);
    const raw = await readBody(req);
    const contentType = req.headers["content-type"] ?? "";
    let body: Record<string, unknown> = {};
    if (contentType.includes("application/json") && raw.length > 0) body = JSON.parse(String(raw));
    const record = (status: number) => {
      const call = { method: req.method ?? "", path: url.pathname, body, at: Date.now(), status };
      calls.push(call);
      for (const listener of listeners) listener(call);
    };
    if (req.headers.authorization !== `Bearer ${accessToken}`) {
      record(401);
      reply(res, 401, {
        error: { message: "Invalid OAuth access token.", type: "OAuthException", code: 190 },
      });
      return;
    }
    const path = url.pathname;
    if (req.method === "GET" && path === `/${VERSION}/${phoneNumberId}`) {
      record(200);
      reply(res, 200, { display_phone_number: "+1 555 0100", id: phoneNumberId });
      return;
    }
    if (req.method === "POST" && path === `/${VERSION}/${phoneNumberId}/messages`) {
      const isReceipt = body.status === "read";
      const next = isReceipt ? undefined : pending[0];
      let failure: (typeof pending)[number] | undefined;
      if (next && next.after > 0) next.after -= 1;
      else if (next) failure = pending.shift();
      if (failure) {
        record(failure.status);
        reply(res, failure.status, failure.body, failure.headers);
        return;
      }
      record(200);
      if (isReceipt) reply(res, 200, { success: true });
      else {
        sent += 1;
        reply(res, 200, {
          messaging_product: "whatsapp",
          contacts: [{ input: body.to, wa_id: body.to }],
          messages: [{ id: `wamid.keel.${sent}` }],
        });
      }
      return;
    }
    if (req.method === "POST" && path === `/${VERSION}/${phoneNumberId}/media`) {
      const form = await new Response(new Uint8Array(raw), {
        headers: { "content-type": contentType },
      }).formData();
      const file = form.get("file") as File;
      uploads.push({
        mime: String(form.get("type")),
        name: file.name,
        bytes: Buffer.from(await file.arrayBuffer()),
      });
      record(200);
      reply(res, 200, { id: `upload-${uploads.length}` });
      return;
    }
    const download = /^\/download\/(.+)$/.exec(path);
    if (req.method === "GET" && download) {
      const item = media.get(decodeURIComponent(download[1]!));
      record(item ? 200 : 404);
      if (!item) return reply(res, 404, { error: { code: 100, message: "no such media" } });
      res.writeHead(200, { "content-type": item.mime });
      res.end(item.bytes);
      return;
    }
    const info = new RegExp(`^/${VERSION}/([^/]+)$`).exec(path);
    if (req.method === "GET" && info && media.has(decodeURIComponent(info[1]!))) {
      const id = decodeURIComponent(info[1]!);
      const item = media.get(id)!;
      record(200);
      reply(res, 200, {
        url: `${apiRoot}download/${encodeURIComponent(id)}`,
        mime_type: item.mime,
        file_size: item.bytes.length,
        id,
        messaging_product: "whatsapp",
      });
      return;
    }
    record(404);
    reply(res, 404, { error: { code: 100, message: `no route ${req.method} ${path}` } });
  }

  const deliveries: WebhookDelivery[] = [];
  /** POSTs `delivery` (again): its status is null until this attempt is answered. */
  function send(delivery: WebhookDelivery, signature: string): void {
    if (!fake.webhookUrl) throw new Error("the fake WhatsApp has no webhook URL yet");
    delivery.status = null;
    fetch(fake.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-hub-signature-256": signature },
      body: delivery.body,
    }).then(
      async (res) => {
        await res.arrayBuffer();
        delivery.status = res.status;
      },
      () => {
        // No answer (the gateway is down, or died mid-request): Meta counts it as not delivered.
        delivery.status = 0;
      },
    );
  }

  const sign = (body: string) =>
    `sha256=${createHmac("sha256", appSecret).update(body).digest("hex")}`;

  const fake: FakeWhatsapp = {
    apiRoot,
    phoneNumberId,
    accessToken,
    appSecret,
    calls,
    onCall(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    webhookUrl: null,
    uploads,
    deliveries,
    post(body, signature = sign(body)) {
      const delivery: WebhookDelivery = { body, status: null };
      deliveries.push(delivery);
      send(delivery, signature);
      return delivery;
    },
    retryUnanswered() {
      const again = deliveries.filter((d) => d.status !== null && d.status !== 200);
      for (const delivery of again) send(delivery, sign(delivery.body));
      return again.length;
    },
    userSends({ from, text, name, media: part }) {
      received += 1;
      const id = `wamid.user.${received}.${Date.now()}`;
      const message: Record<string, unknown> = {
        from,
        id,
        timestamp: String(Math.floor(Date.now() / 1000)),
      };
      if (part) {
        message.type = part.type;
        message[part.type] = {
          id: part.id,
          mime_type: part.mime,
          ...(part.caption && { caption: part.caption }),
          ...(part.filename && { filename: part.filename }),
        };
      } else {
        message.type = "text";
        message.text = { body: text ?? "" };
      }
      const body = JSON.stringify(
        payload([message], [{ profile: { name: name ?? "User" }, wa_id: from }]),
      );
      return { id, delivery: fake.post(body) };
    },
    userPresses(from, buttonId) {
      received += 1;
      const message = {
        from,
        id: `wamid.user.${received}.${Date.now()}`,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: "interactive",
        interactive: { type: "button_reply", button_reply: { id: buttonId, title: "x" } },
      };
      return fake.post(JSON.stringify(payload([message], [{ wa_id: from }])));
    },
    rateLimitNext(seconds) {
      pending.push({
        status: 429,
        headers: { "retry-after": String(seconds) },
        body: { error: { message: "Rate limit hit", type: "OAuthException", code: 130429 } },
        after: 0,
      });
    },
    failNext(code, message, after = 0) {
      pending.push({
        status: 400,
        headers: {},
        body: { error: { message, type: "OAuthException", code } },
        after,
      });
    },
    addMedia(id, bytes, mime) {
      media.set(id, { bytes, mime });
    },
    botTexts(to) {
      return calls
        .filter(
          (c) =>
            c.method === "POST" &&
            c.path.endsWith("/messages") &&
            c.status === 200 &&
            c.body.to === to &&
            c.body.status !== "read",
        )
        .map((c) => {
          const b = c.body as {
            text?: { body?: string };
            interactive?: { body?: { text?: string } };
            image?: { caption?: string };
            document?: { caption?: string };
          };
          return (
            b.text?.body ??
            b.interactive?.body?.text ??
            b.image?.caption ??
            b.document?.caption ??
            ""
          );
        });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };

  function payload(messages: unknown[], contacts: unknown[]) {
    return {
      object: "whatsapp_business_account",
      entry: [
        {
          id: "WABA-1",
          changes: [
            {
              field: "messages",
              value: {
                messaging_product: "whatsapp",
                metadata: { display_phone_number: "15550100", phone_number_id: phoneNumberId },
                contacts,
                messages,
              },
            },
          ],
        },
      ],
    };
  }

  return fake;
}
