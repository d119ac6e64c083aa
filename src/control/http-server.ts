/**
 * The gateway's one HTTP listener: a Hono app on a plain node:http server (so WebSocket upgrades
 * and a bounded close are ours). Checks the Host header, cross-site writes, access (access-gate.ts)
 * and the body size for every request; every error is thrown and rendered by http-errors.ts.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Logger } from "pino";
import type { Access } from "./access.js";
import { type AppEnv, createAccessGate } from "./access-gate.js";
import { acceptedHostNames, isAcceptedHost, isCrossSiteWrite } from "./http-auth.js";
import { httpError, renderHttpError } from "./http-errors.js";

export type { AppEnv } from "./access-gate.js";

export interface HttpServerOptions {
  host: string;
  port: number;
  /** `http.public_hosts`: Host header values accepted besides the loopback names. */
  publicHosts: readonly string[];
  access: Access;
  maxBodyBytes: number;
  logger: Logger;
  /** Route groups mounted at the root, in order. */
  routes: Hono<AppEnv>[];
  /** WebSocket upgrades by path. */
  upgrades?: Record<string, (req: IncomingMessage, socket: Duplex, head: Buffer) => void>;
  /** Paths whose routes cap their bodies themselves (file uploads), instead of `maxBodyBytes`. */
  ownBodyLimit?: string[];
  /** Slow and surplus clients (Node's own server limits); Node's defaults when absent. */
  limits?: TransportLimits;
}

/**
 * How long a client may take to send a request, and how many may be connected. Node's server
 * enforces them: a request whose headers (or whole body) have not arrived in time is answered 408
 * and closed; a connection beyond `maxConnections` is closed as it arrives. Answers are never
 * timed: once a request has arrived, a long turn or a stream takes what it takes.
 */
export interface TransportLimits {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  maxConnections: number;
}

/** How often Node looks for requests past their deadline (its default, 30 s, would be the real bound). */
function checkingIntervalMs(limits: TransportLimits): number {
  return Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4)));
}

/** A connection refused for `maxConnections` is logged at most this often. */
const DROP_LOG_INTERVAL_MS = 60_000;

/**
 * The body length a Node request declares, 0 for one without a body, or undefined when only
 * reading it tells (a chunked body), or when there is no Node request (`app.request()` in tests).
 *
 * Checked here rather than by Hono's body limit, which asks the web Request for its body: that
 * builds, for every request, the full web Request node-request.ts exists to avoid (a web stream,
 * an AbortController, a Headers object), which on Node 20 outlives young-generation collections.
 * Node's parser refuses a request that declares both a length and chunking, or a bad length.
 */
function declaredBodyLength(incoming: IncomingMessage | undefined): number | undefined {
  if (!incoming || incoming.headers["transfer-encoding"] !== undefined) return undefined;
  const length = incoming.headers["content-length"];
  // HTTP/1.1: a request with neither header has no body.
  return length === undefined ? 0 : Number(length);
}

export class HttpServer {
  private server: Server | null = null;
  /** Host header values answered; the port is the bound one once listening. */
  private acceptedHosts: Set<string>;

  constructor(private readonly options: HttpServerOptions) {
    this.acceptedHosts = this.hostNames(options.port);
  }

  private hostNames(port: number): Set<string> {
    const { host, publicHosts } = this.options;
    return acceptedHostNames({ host, port, publicHosts });
  }

  /** Adds a route group (before start). */
  addRoutes(routes: Hono<AppEnv>): void {
    this.options.routes.push(routes);
  }

  /** Adds a route group whose `path` caps its request bodies itself (before start). */
  addRoutesWithOwnBodyLimit(path: string, routes: Hono<AppEnv>): void {
    this.options.ownBodyLimit = [...(this.options.ownBodyLimit ?? []), path];
    this.options.routes.push(routes);
  }

  /** Adds a WebSocket upgrade handler for `path` (before start). */
  addUpgrade(
    path: string,
    handler: (req: IncomingMessage, socket: Duplex, head: Buffer) => void,
  ): void {
    this.options.upgrades = { ...this.options.upgrades, [path]: handler };
  }

  /** Builds the Hono app (exposed for in-process tests with `app.request()`). */
  buildApp(): Hono<AppEnv> {
    const { maxBodyBytes, logger } = this.options;
    const app = new Hono<AppEnv>();
    app.use(async (c, next) => {
      if (!isAcceptedHost(c.req.header("host"), this.acceptedHosts))
        throw httpError("HOST_REFUSED");
      return next();
    });
    app.use(async (c, next) => {
      const { method } = c.req;
      const [origin, host, site] = ["origin", "host", "sec-fetch-site"].map((h) => c.req.header(h));
      if (isCrossSiteWrite(method, origin, host, site)) throw httpError("CROSS_SITE_REFUSED");
      return next();
    });
    app.use(createAccessGate(this.options.access));
    const tooLarge = (): never => {
      throw httpError(
        "BODY_TOO_LARGE",
        `Request body exceeds ${maxBodyBytes} bytes; raise http.max_body_bytes in config.yaml to accept larger ones.`,
      );
    };
    const countWhileReading = bodyLimit({ maxSize: maxBodyBytes, onError: tooLarge });
    app.use((c, next) => {
      if (this.options.ownBodyLimit?.includes(c.req.path)) return next();
      const declared = declaredBodyLength(c.env?.incoming);
      if (declared === undefined) return countWhileReading(c, next);
      return declared > maxBodyBytes ? tooLarge() : next();
    });
    for (const routes of this.options.routes) app.route("/", routes);
    app.notFound((c) =>
      renderHttpError(
        c,
        httpError("NOT_FOUND", `No route for ${c.req.method} ${c.req.path}.`),
        logger,
      ),
    );
    app.onError((err, c) => renderHttpError(c, err, logger));
    return app;
  }

  /** Listens; resolves with the bound port (useful with port 0). */
  start(): Promise<number> {
    const app = this.buildApp();
    const { limits, logger } = this.options;
    const server = createServer(
      limits
        ? {
            headersTimeout: limits.headersTimeoutMs,
            requestTimeout: limits.requestTimeoutMs,
            connectionsCheckingInterval: checkingIntervalMs(limits),
          }
        : {},
      getRequestListener(app.fetch),
    );
    if (limits) {
      server.maxConnections = limits.maxConnections;
      let loggedAt = Number.NEGATIVE_INFINITY;
      server.on("drop", () => {
        if (Date.now() - loggedAt < DROP_LOG_INTERVAL_MS) return;
        loggedAt = Date.now();
        logger.warn({ maxConnections: limits.maxConnections }, "connection refused: too many open");
      });
    }
    server.on("upgrade", (req, socket, head) => this.upgrade(req, socket, head));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port, this.options.host, () => {
        server.off("error", reject);
        const address = server.address();
        const port = typeof address === "object" && address ? address.port : this.options.port;
        this.acceptedHosts = this.hostNames(port);
        resolve(port);
      });
    });
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    // Node hands the socket over without an error listener, and the answer may come late (a
    // wrong credential is held back up to a second): a client's reset meanwhile, or while a
    // refusal is written, would otherwise be an uncaught error that ends the gateway.
    socket.on("error", () => socket.destroy());
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const handler = this.options.upgrades?.[path];
    if (!isAcceptedHost(req.headers.host, this.acceptedHosts)) {
      socket.end(
        "HTTP/1.1 421 Misdirected Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
      );
      return;
    }
    if (!handler) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      return;
    }
    handler(req, socket, head);
  }

  /** Stops accepting and closes every connection, streams included; never waits on a client. */
  stop(): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    this.server = null;
    return new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
