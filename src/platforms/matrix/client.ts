/**
 * The few client-server API calls Keel makes on Matrix, over plain fetch. No SDK: matrix-bot-sdk
 * pulls in a native crypto package that downloads a binary from outside npm when installed, and
 * matrix-js-sdk is a full client (its own sync store, crypto, timelines) for what is here six
 * endpoints. End-to-end encryption is not supported, so neither library's main extra is used.
 * A rate limit (`M_LIMIT_EXCEEDED`, 429) means nothing happened: retried after `retry_after_ms`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { readAtMost } from "../kit/read-at-most.js";

export class MatrixError extends Error {
  constructor(
    readonly status: number,
    readonly errcode: string | null,
    detail: string,
    readonly retryAfterMs: number | null = null,
  ) {
    super(detail);
  }
}

export interface MatrixEvent {
  type: string;
  event_id: string;
  sender: string;
  content: Record<string, unknown>;
  state_key?: string;
  origin_server_ts?: number;
}

export interface SyncResponse {
  next_batch: string;
  rooms?: {
    join?: Record<string, { timeline?: { events?: MatrixEvent[] } }>;
    invite?: Record<string, { invite_state?: { events?: MatrixEvent[] } }>;
  };
}

export interface MatrixClientOptions {
  homeserver: string;
  accessToken: string;
  requestTimeoutMs: number;
  maxAttempts: number;
  maxWaitMs: number;
  signal: AbortSignal;
}

const enc = encodeURIComponent;

export class MatrixClient {
  constructor(private readonly options: MatrixClientOptions) {}

  whoami(): Promise<{ user_id: string }> {
    return this.call("GET", "/_matrix/client/v3/account/whoami") as Promise<{ user_id: string }>;
  }

  /** One long poll: returns when there is news or after `timeoutMs`. */
  sync(since: string | null, timeoutMs: number, signal: AbortSignal): Promise<SyncResponse> {
    const query = new URLSearchParams({ timeout: String(timeoutMs) });
    if (since) query.set("since", since);
    return this.call("GET", `/_matrix/client/v3/sync?${query}`, undefined, {
      signal,
      timeoutMs: timeoutMs + this.options.requestTimeoutMs,
    }) as Promise<SyncResponse>;
  }

  /**
   * Sends an event; the server stores one event per transaction id, so a retry is harmless.
   * `wait: false` (previews) fails a rate-limited send at once instead of waiting.
   */
  async send(
    roomId: string,
    txnId: string,
    content: Record<string, unknown>,
    options: { wait?: boolean } = {},
  ): Promise<string> {
    const put = () =>
      this.call(
        "PUT",
        `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/${enc(txnId)}`,
        content,
      );
    const answer = (await (options.wait === false ? put() : this.withRetry(put))) as {
      event_id?: string;
    };
    return answer.event_id ?? "";
  }

  async redact(roomId: string, eventId: string, txnId: string): Promise<void> {
    await this.withRetry(() =>
      this.call(
        "PUT",
        `/_matrix/client/v3/rooms/${enc(roomId)}/redact/${enc(eventId)}/${enc(txnId)}`,
        {},
      ),
    );
  }

  async join(roomId: string): Promise<void> {
    await this.withRetry(() => this.call("POST", `/_matrix/client/v3/join/${enc(roomId)}`, {}));
  }

  async joinedMembers(roomId: string): Promise<string[]> {
    const answer = (await this.call(
      "GET",
      `/_matrix/client/v3/rooms/${enc(roomId)}/joined_members`,
    )) as { joined?: Record<string, unknown> };
    return Object.keys(answer.joined ?? {});
  }

  /** Uploads a file to the homeserver's media repository; returns its `mxc://` URI. */
  async upload(bytes: Buffer, mime: string, name: string): Promise<string> {
    const root = this.options.homeserver.replace(/\/+$/, "");
    const res = await fetch(`${root}/_matrix/media/v3/upload?filename=${enc(name)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.options.accessToken}`, "content-type": mime },
      body: new Uint8Array(bytes),
      signal: AbortSignal.any([this.options.signal, AbortSignal.timeout(120_000)]),
    });
    const answer = (await res.json().catch(() => ({}))) as { content_uri?: string; error?: string };
    if (!res.ok || !answer.content_uri) {
      throw new MatrixError(res.status, null, `Matrix upload ${res.status}: ${answer.error ?? ""}`);
    }
    return answer.content_uri;
  }

  /**
   * Downloads an `mxc://server/id` file with the token (authenticated media, spec 1.11), reading
   * at most `maxBytes`: `tooLarge` when there was more.
   */
  async download(
    mxc: string,
    maxBytes: number,
    signal: AbortSignal,
  ): Promise<{ bytes: Buffer; tooLarge: boolean }> {
    const match = /^mxc:\/\/([^/]+)\/([^/?#]+)$/.exec(mxc);
    if (!match) throw new Error(`not a Matrix media URI: ${mxc}`);
    const root = this.options.homeserver.replace(/\/+$/, "");
    const res = await fetch(
      `${root}/_matrix/client/v1/media/download/${enc(match[1]!)}/${enc(match[2]!)}`,
      {
        headers: { authorization: `Bearer ${this.options.accessToken}` },
        signal: AbortSignal.any([this.options.signal, signal]),
      },
    );
    if (!res.ok || !res.body)
      throw new MatrixError(res.status, null, `Matrix download ${res.status}`);
    return readAtMost(res.body, maxBytes);
  }

  async typing(roomId: string, userId: string, typing: boolean, timeoutMs: number): Promise<void> {
    await this.call("PUT", `/_matrix/client/v3/rooms/${enc(roomId)}/typing/${enc(userId)}`, {
      typing,
      ...(typing && { timeout: timeoutMs }),
    });
  }

  private async withRetry<T>(attempt: () => Promise<T>): Promise<T> {
    for (let n = 1; ; n++) {
      try {
        return await attempt();
      } catch (err) {
        const limited =
          err instanceof MatrixError && (err.status === 429 || err.errcode === "M_LIMIT_EXCEEDED");
        if (!limited || n >= this.options.maxAttempts) throw err;
        const waitMs = err.retryAfterMs ?? 1000 * 2 ** (n - 1);
        if (waitMs > this.options.maxWaitMs) throw err;
        await sleep(waitMs, undefined, { signal: this.options.signal });
      }
    }
  }

  private async call(
    method: "GET" | "PUT" | "POST",
    path: string,
    body?: Record<string, unknown>,
    extra: { signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<unknown> {
    const root = this.options.homeserver.replace(/\/+$/, "");
    const signals = [
      this.options.signal,
      AbortSignal.timeout(extra.timeoutMs ?? this.options.requestTimeoutMs),
    ];
    if (extra.signal) signals.push(extra.signal);
    const res = await fetch(`${root}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.options.accessToken}`,
        ...(body && { "content-type": "application/json" }),
      },
      ...(body && { body: JSON.stringify(body) }),
      signal: AbortSignal.any(signals),
    });
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    } catch {
      // Not JSON (a proxy's page): reported by status.
    }
    if (res.ok) return parsed;
    const errcode = typeof parsed.errcode === "string" ? parsed.errcode : null;
    const retryAfter = typeof parsed.retry_after_ms === "number" ? parsed.retry_after_ms : null;
    throw new MatrixError(
      res.status,
      errcode,
      `Matrix ${res.status}${errcode ? ` ${errcode}` : ""}: ${typeof parsed.error === "string" ? parsed.error : path.split("?")[0]}`,
      retryAfter,
    );
  }
}
