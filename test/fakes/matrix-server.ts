/**
 * A stand-in Matrix homeserver on 127.0.0.1 with the client-server endpoints Keel uses: whoami,
 * `/sync` (a real long poll over one event log, `since` tokens `s<position>`), room sends by
 * transaction id (one event per id, as servers do), joins, joined members and typing, and the
 * media repository (upload, authenticated download).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface MatrixCall {
  method: string;
  path: string;
  body: Record<string, unknown>;
  at: number;
  status: number;
}

interface Logged {
  position: number;
  roomId: string;
  kind: "timeline" | "invite";
  event: Record<string, unknown>;
}

export interface FakeMatrix {
  homeserver: string;
  userId: string;
  accessToken: string;
  calls: MatrixCall[];
  /** `since` of every /sync request, as positions (0 for none). */
  sinceSeen: number[];
  /** A user writes in a room; returns the event (and its log position). */
  userSays(input: { roomId: string; sender: string; body: string; encrypted?: boolean }): {
    event: Record<string, unknown>;
    position: number;
  };
  /** The same event appears again in a later sync (a replay). */
  replay(event: Record<string, unknown>, roomId: string): void;
  invite(roomId: string, inviter: string): void;
  /** Members of a room (two: a direct chat). */
  setMembers(roomId: string, members: string[]): void;
  /** The next room send is refused with 429 M_LIMIT_EXCEEDED. */
  rateLimitNext(retryAfterMs: number): void;
  /** A user uploads a file and sends it to a room as `msgtype` (m.image, m.file, ...). */
  userSendsFile(input: {
    roomId: string;
    sender: string;
    msgtype: string;
    name: string;
    mime: string;
    bytes: Buffer;
    caption?: string;
  }): { event: Record<string, unknown>; position: number };
  /** Files Keel sent to a room: the event's content and the uploaded bytes. */
  botFiles(roomId: string): { content: Record<string, unknown>; bytes: Buffer | undefined }[];
  /** Calls `listener` with every call Keel makes from now on (when answered); returns the unsubscribe. */
  onCall(listener: (call: MatrixCall) => void): () => void;
  /** Bodies Keel sent to a room, oldest first. */
  botTexts(roomId: string): string[];
  /** The same, each marked when an `m.replace` changed it since it was sent. */
  botMessages(roomId: string): { text: string; edited: boolean }[];
  joined: string[];
  close(): Promise<void>;
}

export async function startFakeMatrix(
  options: { userId?: string; accessToken?: string } = {},
): Promise<FakeMatrix> {
  const userId = options.userId ?? "@keel:fake.test";
  const accessToken = options.accessToken ?? "syt_fake_token";
  const calls: MatrixCall[] = [];
  const listeners = new Set<(call: MatrixCall) => void>();
  const sinceSeen: number[] = [];
  const log: Logged[] = [];
  const members = new Map<string, string[]>();
  const sent = new Map<string, Record<string, unknown>>();
  /** Keel's visible messages: an `m.replace` changes one's body, a redaction removes it. */
  const sentOrder: {
    roomId: string;
    body: string;
    eventId: string;
    removed: boolean;
    edited: boolean;
  }[] = [];
  const joined: string[] = [];
  const media = new Map<string, { mime: string; bytes: Buffer }>();
  const sentFiles: { roomId: string; content: Record<string, unknown> }[] = [];
  let limits: number[] = [];
  let waiters: (() => void)[] = [];
  let counter = 0;

  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  const append = (entry: Omit<Logged, "position">) => {
    const logged = { ...entry, position: log.length + 1 };
    log.push(logged);
    wake();
    return logged.position;
  };

  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const homeserver = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function reply(res: ServerResponse, status: number, body: unknown) {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", homeserver);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    const json = (req.headers["content-type"] ?? "").includes("json");
    const body =
      json && bytes.length > 0 ? (JSON.parse(bytes.toString()) as Record<string, unknown>) : {};
    const path = decodeURIComponent(url.pathname);
    const record = (status: number) => {
      const call = { method: req.method ?? "", path, body, at: Date.now(), status };
      calls.push(call);
      for (const listener of listeners) listener(call);
    };
    if (req.headers.authorization !== `Bearer ${accessToken}`) {
      record(401);
      return reply(res, 401, { errcode: "M_UNKNOWN_TOKEN", error: "Invalid access token" });
    }
    const base = "/_matrix/client/v3";
    if (req.method === "POST" && path === "/_matrix/media/v3/upload") {
      const id = `m${++counter}`;
      media.set(id, { mime: String(req.headers["content-type"] ?? ""), bytes });
      record(200);
      return reply(res, 200, { content_uri: `mxc://fake.test/${id}` });
    }
    const download = /^\/_matrix\/client\/v1\/media\/download\/fake\.test\/([^/]+)$/.exec(path);
    if (req.method === "GET" && download) {
      const file = media.get(download[1]!);
      record(file ? 200 : 404);
      if (!file) return reply(res, 404, { errcode: "M_NOT_FOUND", error: "no such media" });
      res.writeHead(200, { "content-type": file.mime });
      res.end(file.bytes);
      return;
    }
    if (path === `${base}/account/whoami`) {
      record(200);
      return reply(res, 200, { user_id: userId });
    }
    if (path === `${base}/sync`) {
      const since = url.searchParams.get("since");
      const from = since ? Number(since.slice(1)) : 0;
      sinceSeen.push(from);
      const timeout = Number(url.searchParams.get("timeout") ?? 0);
      if (since && log.length <= from && timeout > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, timeout);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
          req.on("close", resolve);
        });
      }
      // A first sync (no since) gives recent history too, as servers do.
      const news = log.filter((l) => l.position > from);
      const join: Record<string, { timeline: { events: unknown[] } }> = {};
      const invite: Record<string, { invite_state: { events: unknown[] } }> = {};
      for (const l of news) {
        if (l.kind === "timeline") {
          join[l.roomId] ??= { timeline: { events: [] } };
          join[l.roomId]!.timeline.events.push(l.event);
        } else {
          invite[l.roomId] ??= { invite_state: { events: [] } };
          invite[l.roomId]!.invite_state.events.push(l.event);
        }
      }
      record(200);
      return reply(res, 200, { next_batch: `s${log.length}`, rooms: { join, invite } });
    }
    const send = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/send\/m\.room\.message\/(.+)$/.exec(path);
    if (req.method === "PUT" && send) {
      const [, roomId, txnId] = send;
      if (limits.length > 0) {
        const retry = limits.shift()!;
        record(429);
        return reply(res, 429, {
          errcode: "M_LIMIT_EXCEEDED",
          error: "Too many requests",
          retry_after_ms: retry,
        });
      }
      record(200);
      const key = `${roomId}|${txnId}`;
      if (!sent.has(key)) {
        const eventId = `$keel${++counter}`;
        sent.set(key, { event_id: eventId });
        const relates = body["m.relates_to"] as
          | { rel_type?: string; event_id?: string }
          | undefined;
        const replaced = body["m.new_content"] as { body?: string } | undefined;
        if (typeof body.url === "string") sentFiles.push({ roomId: roomId!, content: body });
        if (relates?.rel_type === "m.replace") {
          const target = sentOrder.find((m) => m.eventId === relates.event_id);
          if (target) {
            target.body = String(replaced?.body ?? "");
            target.edited = true;
          }
        } else {
          sentOrder.push({
            roomId: roomId!,
            body: String(body.body ?? ""),
            eventId,
            removed: false,
            edited: false,
          });
        }
      }
      return reply(res, 200, sent.get(key));
    }
    const redact = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/redact\/([^/]+)\/.+$/.exec(path);
    if (req.method === "PUT" && redact) {
      const target = sentOrder.find((m) => m.eventId === redact[2]);
      if (target) target.removed = true;
      record(200);
      return reply(res, 200, { event_id: `$redaction${++counter}` });
    }
    const joinRoom = /^\/_matrix\/client\/v3\/join\/(.+)$/.exec(path);
    if (req.method === "POST" && joinRoom) {
      joined.push(joinRoom[1]!);
      record(200);
      return reply(res, 200, { room_id: joinRoom[1] });
    }
    const memberList = /^\/_matrix\/client\/v3\/rooms\/([^/]+)\/joined_members$/.exec(path);
    if (memberList) {
      record(200);
      const list = members.get(memberList[1]!) ?? [userId, "@someone:fake.test"];
      return reply(res, 200, { joined: Object.fromEntries(list.map((m) => [m, {}])) });
    }
    if (/^\/_matrix\/client\/v3\/rooms\/[^/]+\/typing\/.+$/.test(path) && req.method === "PUT") {
      record(200);
      return reply(res, 200, {});
    }
    record(404);
    reply(res, 404, { errcode: "M_UNRECOGNIZED", error: `no route ${req.method} ${path}` });
  }

  const fake: FakeMatrix = {
    homeserver,
    userId,
    accessToken,
    calls,
    onCall(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    sinceSeen,
    joined,
    userSays({ roomId, sender, body, encrypted }) {
      const event = encrypted
        ? {
            type: "m.room.encrypted",
            event_id: `$u${++counter}`,
            sender,
            content: { algorithm: "m.megolm.v1.aes-sha2", ciphertext: "…" },
          }
        : {
            type: "m.room.message",
            event_id: `$u${++counter}`,
            sender,
            origin_server_ts: Date.now(),
            content: { msgtype: "m.text", body },
          };
      const position = append({ roomId, kind: "timeline", event });
      return { event, position };
    },
    userSendsFile({ roomId, sender, msgtype, name, mime, bytes, caption }) {
      const id = `m${++counter}`;
      media.set(id, { mime, bytes });
      const event = {
        type: "m.room.message",
        event_id: `$u${++counter}`,
        sender,
        origin_server_ts: Date.now(),
        content: {
          msgtype,
          body: caption ?? name,
          ...(caption && { filename: name }),
          url: `mxc://fake.test/${id}`,
          info: { mimetype: mime, size: bytes.length },
        },
      };
      const position = append({ roomId, kind: "timeline", event });
      return { event, position };
    },
    botFiles: (roomId) =>
      sentFiles
        .filter((f) => f.roomId === roomId)
        .map((f) => ({
          content: f.content,
          bytes: media.get(String(f.content.url).split("/").pop()!)?.bytes,
        })),
    replay(event, roomId) {
      append({ roomId, kind: "timeline", event });
    },
    invite(roomId, inviter) {
      append({
        roomId,
        kind: "invite",
        event: {
          type: "m.room.member",
          state_key: userId,
          sender: inviter,
          content: { membership: "invite" },
        },
      });
    },
    setMembers(roomId, list) {
      members.set(roomId, list);
    },
    rateLimitNext(retryAfterMs) {
      limits = [...limits, retryAfterMs];
    },
    botTexts: (roomId) =>
      sentOrder.filter((s) => s.roomId === roomId && !s.removed).map((s) => s.body),
    botMessages: (roomId) =>
      sentOrder
        .filter((s) => s.roomId === roomId && !s.removed)
        .map((s) => ({ text: s.body, edited: s.edited })),
    close: () =>
      new Promise<void>((resolve) => {
        wake();
        waiters = [];
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return fake;
}
