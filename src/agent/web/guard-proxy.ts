/**
 * The browser's only way out: a forward proxy on loopback that Chromium is told to use for every
 * request (loopback included), which connects through the same guarded lookup as `web_fetch`.
 * Intercepting requests inside the browser would check a name that Chromium then resolves again
 * on its own; here the address checked is the address connected to, for pages, their
 * subresources, redirects, WebSockets and downloads alike.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import {
  createServer,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import {
  type AddressRules,
  bareHost,
  guardedLookup,
  RefusedAddressError,
  type Resolve,
  refusalOfLiteral,
} from "./address-rules.js";

export interface GuardProxy {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /**
   * Credentials the proxy demands (Basic), so that no other local process can use it as a way
   * out; Playwright answers the challenge for the browser.
   */
  username: string;
  password: string;
  /** Refusals since the last call (for the tool to report what a page was not allowed to load). */
  takeRefusals(): string[];
  close(): Promise<void>;
}

/** Hop-by-hop headers a proxy must not forward (RFC 9110 §7.6.1). */
const HOP_HEADERS = new Set([
  "connection",
  "proxy-connection",
  "keep-alive",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

export async function startGuardProxy(rules: AddressRules, resolve?: Resolve): Promise<GuardProxy> {
  const lookup = guardedLookup(rules, resolve);
  const username = "keel";
  const password = randomBytes(18).toString("base64url");
  const expected = Buffer.from(
    `Basic ${Buffer.from(`${username}:${password}`).toString("base64")}`,
  );
  const authorized = (req: IncomingMessage) => {
    const given = Buffer.from(req.headers["proxy-authorization"] ?? "");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const refusals: string[] = [];
  const sockets = new Set<Socket | Duplex>();
  const refuse = (why: string) => {
    if (refusals.length < 20) refusals.push(why);
  };
  const literalRefusal = (host: string) => refusalOfLiteral(rules, host);

  const guard: ProxyGuard = { authorized, lookup, refuse, literalRefusal, sockets };
  const server: Server = createServer((req, res) => forwardHttp(guard, req, res));
  // CONNECT: https and WebSockets. The tunnel opens only to the address the lookup checked.
  server.on("connect", (req: IncomingMessage, client: Duplex, head: Buffer) =>
    tunnel(guard, req, client, head),
  );
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  await new Promise<void>((ready, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => ready());
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    username,
    password,
    takeRefusals: () => refusals.splice(0),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

/** What the proxy's two kinds of request share: the credential, the checked lookup, refusals. */
interface ProxyGuard {
  authorized(req: IncomingMessage): boolean;
  lookup: ReturnType<typeof guardedLookup>;
  refuse(why: string): void;
  /** Null when `host` may be dialled as far as its literal form tells; else why not. */
  literalRefusal(host: string): string | null;
  sockets: Set<Socket | Duplex>;
}

/** A plain `http://` request, forwarded with the hop-by-hop headers dropped. */
function forwardHttp(guard: ProxyGuard, req: IncomingMessage, res: ServerResponse): void {
  if (!guard.authorized(req)) {
    res.writeHead(407, { "proxy-authenticate": 'Basic realm="keel"' }).end();
    return;
  }
  let target: URL;
  try {
    target = new URL(req.url ?? "");
  } catch {
    res.writeHead(400).end("a proxy request needs an absolute URL");
    return;
  }
  if (target.protocol !== "http:") {
    res.writeHead(400).end("only http:// is proxied this way");
    return;
  }
  const literal = guard.literalRefusal(target.hostname);
  if (literal) {
    guard.refuse(literal);
    res.writeHead(403, { "content-type": "text/plain" }).end(`Refused by Keel: ${literal}`);
    return;
  }
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !HOP_HEADERS.has(name)) headers[name] = value;
  }
  const outgoing = httpRequest(target, {
    method: req.method,
    headers,
    agent: new HttpAgent({ lookup: guard.lookup }),
  });
  outgoing.on("response", (upstream) => {
    const back: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (value !== undefined && !HOP_HEADERS.has(name)) back[name] = value;
    }
    res.writeHead(upstream.statusCode ?? 502, back);
    upstream.pipe(res);
  });
  outgoing.on("error", (error) => {
    const why = error instanceof RefusedAddressError ? error.message : null;
    if (why) guard.refuse(why);
    if (!res.headersSent) {
      res
        .writeHead(why ? 403 : 502, { "content-type": "text/plain" })
        .end(why ? `Refused by Keel: ${why}` : `Keel's proxy could not connect: ${error.message}`);
    } else {
      res.destroy();
    }
  });
  // The browser gave up (navigated away, closed): stop the upstream request too.
  res.on("close", () => outgoing.destroy());
  req.pipe(outgoing);
}

/** CONNECT: a tunnel to the address the lookup checked. */
function tunnel(guard: ProxyGuard, req: IncomingMessage, client: Duplex, head: Buffer): void {
  guard.sockets.add(client);
  client.on("close", () => guard.sockets.delete(client));
  client.on("error", () => client.destroy());
  if (!guard.authorized(req)) {
    client.end(
      'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="keel"\r\n\r\n',
    );
    return;
  }
  const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? "");
  if (!match) {
    client.end("HTTP/1.1 400 Bad Request\r\n\r\n");
    return;
  }
  const host = match[1]!;
  const port = Number(match[2]);
  const literal = guard.literalRefusal(host);
  if (literal) {
    guard.refuse(literal);
    client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
    return;
  }
  const upstream = connect({ host: bareHost(host), port, lookup: guard.lookup });
  guard.sockets.add(upstream);
  upstream.on("close", () => guard.sockets.delete(upstream));
  upstream.on("connect", () => {
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on("error", (error) => {
    if (error instanceof RefusedAddressError) guard.refuse(error.message);
    if (client.writable) client.end("HTTP/1.1 403 Forbidden\r\n\r\n");
    else client.destroy();
  });
}
