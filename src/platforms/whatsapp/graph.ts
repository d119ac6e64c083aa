/**
 * The few Graph API calls Keel makes for WhatsApp, over plain fetch (no SDK: the Cloud API is a
 * handful of JSON endpoints). A rate-limit answer means nothing was sent, so it is retried here
 * after the Retry-After Meta gives (or a backoff when it gives none); every other failure is
 * thrown to the caller (the outbox retries a reply later).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { readAtMost } from "../kit/read-at-most.js";

/** The Graph API version the calls name; the webhook format is the same across recent ones. */
export const GRAPH_VERSION = "v21.0";

/** Graph error codes that mean "too many calls": nothing was sent; try again later. */
const RATE_LIMIT_CODES = new Set([4, 17, 32, 613, 80007, 130429, 131056]);
/** The user last wrote more than 24 hours ago: only a template message may reach them. */
export const OUTSIDE_WINDOW_CODE = 131047;
/** The token is wrong or expired (OAuthException). */
export const AUTH_ERROR_CODE = 190;

export class GraphError extends Error {
  constructor(
    readonly status: number,
    readonly code: number | null,
    detail: string,
    /** Seconds Meta asked us to wait, when it said. */
    readonly retryAfterSec: number | null = null,
  ) {
    super(detail);
  }

  get rateLimited(): boolean {
    return this.status === 429 || (this.code !== null && RATE_LIMIT_CODES.has(this.code));
  }
}

export interface GraphRetry {
  /** Attempts per call while rate-limited. */
  maxAttempts: number;
  /** A wait longer than this fails the call instead of holding the chat. */
  maxWaitMs: number;
  /** The wait before retry `attempt` when Meta names none. */
  backoffMs(attempt: number): number;
}

export interface GraphOptions {
  apiRoot: string;
  phoneNumberId: string;
  accessToken: string;
  requestTimeoutMs: number;
  retry: GraphRetry;
  signal: AbortSignal;
}

/** A message sent: the id Meta gave it (`wamid.…`). */
export interface SentMessage {
  id: string;
}

export class GraphClient {
  constructor(private readonly options: GraphOptions) {}

  private url(path: string): string {
    const root = this.options.apiRoot.endsWith("/")
      ? this.options.apiRoot
      : `${this.options.apiRoot}/`;
    return `${root}${GRAPH_VERSION}/${path}`;
  }

  /** The cheapest authenticated call: the phone number's own record. Proves token and id. */
  async probe(): Promise<{ displayPhoneNumber: string | null }> {
    const answer = (await this.call(
      "GET",
      `${this.options.phoneNumberId}?fields=display_phone_number`,
    )) as {
      display_phone_number?: string;
    };
    return { displayPhoneNumber: answer.display_phone_number ?? null };
  }

  /** POST /{phone_number_id}/messages, retried while rate-limited. */
  async sendMessage(body: Record<string, unknown>): Promise<SentMessage> {
    const answer = (await this.withRetry(() =>
      this.call("POST", `${this.options.phoneNumberId}/messages`, {
        messaging_product: "whatsapp",
        ...body,
      }),
    )) as { messages?: { id?: string }[] };
    return { id: answer.messages?.[0]?.id ?? "" };
  }

  /** Marks a user's message read; with `typing`, also shows "typing…" (up to 25 s or a reply). */
  async markRead(messageId: string, typing: boolean): Promise<void> {
    await this.call("POST", `${this.options.phoneNumberId}/messages`, {
      messaging_product: "whatsapp",
      status: "read",
      message_id: messageId,
      ...(typing && { typing_indicator: { type: "text" } }),
    });
  }

  /** A user's media: its temporary URL, type and size (GET /{media_id}). */
  async mediaInfo(
    mediaId: string,
  ): Promise<{ url: string; mime: string | null; size: number | null }> {
    const answer = (await this.call("GET", encodeURIComponent(mediaId))) as {
      url?: string;
      mime_type?: string;
      file_size?: number;
    };
    if (!answer.url) throw new GraphError(200, null, `media ${mediaId} has no URL`);
    return { url: answer.url, mime: answer.mime_type ?? null, size: answer.file_size ?? null };
  }

  /** Downloads media bytes from the URL mediaInfo gave (it needs the token too). */
  async download(
    url: string,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<{ bytes: Buffer; tooLarge: boolean }> {
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${this.options.accessToken}` },
      signal: AbortSignal.any([
        signal,
        this.options.signal,
        AbortSignal.timeout(this.options.requestTimeoutMs),
      ]),
    });
    if (!res.ok || !res.body)
      throw new GraphError(res.status, null, `media download: HTTP ${res.status}`);
    return readAtMost(res.body, maxBytes);
  }

  /** Uploads a file for sending (POST /{phone_number_id}/media); its media id. */
  async upload(bytes: Buffer, mime: string, name: string): Promise<string> {
    const form = new FormData();
    form.set("messaging_product", "whatsapp");
    form.set("type", mime);
    form.set("file", new Blob([new Uint8Array(bytes)], { type: mime }), name);
    const answer = (await this.withRetry(() =>
      this.call("POST", `${this.options.phoneNumberId}/media`, form),
    )) as { id?: string };
    if (!answer.id) throw new GraphError(200, null, "media upload returned no id");
    return answer.id;
  }

  private async withRetry<T>(attempt: () => Promise<T>): Promise<T> {
    const { maxAttempts, maxWaitMs, backoffMs } = this.options.retry;
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        if (!(err instanceof GraphError) || !err.rateLimited || n >= maxAttempts) throw err;
        const waitMs = err.retryAfterSec !== null ? err.retryAfterSec * 1000 : backoffMs(n);
        if (waitMs > maxWaitMs) throw err;
        await sleep(waitMs, undefined, { signal: this.options.signal });
      }
    }
  }

  private async call(
    method: "GET" | "POST",
    path: string,
    body?: Record<string, unknown> | FormData,
  ): Promise<unknown> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.options.accessToken}` };
    if (body && !(body instanceof FormData)) headers["content-type"] = "application/json";
    const res = await fetch(this.url(path), {
      method,
      headers,
      ...(body && { body: body instanceof FormData ? body : JSON.stringify(body) }),
      signal: AbortSignal.any([
        this.options.signal,
        AbortSignal.timeout(this.options.requestTimeoutMs),
      ]),
    });
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // A proxy's HTML error page: reported by status below.
    }
    if (res.ok) return parsed ?? {};
    const error = (
      parsed as {
        error?: { code?: number; message?: string; error_data?: { details?: string } };
      } | null
    )?.error;
    const retryAfter = Number(res.headers.get("retry-after"));
    const detail = error?.error_data?.details ?? error?.message ?? `HTTP ${res.status}`;
    throw new GraphError(
      res.status,
      typeof error?.code === "number" ? error.code : null,
      `Graph API ${res.status}${error?.code ? ` (code ${error.code})` : ""}: ${detail}`,
      Number.isFinite(retryAfter) && retryAfter >= 0 && res.headers.has("retry-after")
        ? retryAfter
        : null,
    );
  }
}
