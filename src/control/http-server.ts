/**
 * The gateway's one HTTP listener: a Hono app on a plain node:http server (so WebSocket upgrades
 * and a bounded close are ours). Checks the Host header and the body size for every request and
 * maps errors to `{ error: { code, message } }`.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { Duplex } from "node:stream";
import { getRequestListener, type HttpBindings } from "@hono/node-server";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Logger } from "pino";
import { GatewayError } from "../lib/errors.js";
import { isAcceptedHost, isCrossSiteWrite } from "./http-auth.js";

export type AppEnv = { Bindings: HttpBindings };

export interface HttpServerOptions {
  host: string;
  port: number;
  maxBodyBytes: number;
  logger: Logger;
  /** Route groups mounted at the root, in order. */
  routes: Hono<AppEnv>[];
  /** WebSocket upgrades by path. */
  upgrades?: Record<string, (req: IncomingMessage, socket: Duplex, head: Buffer) => void>;
}

export class HttpServer {
  private server: Server | null = null;

  constructor(private readonly options: HttpServerOptions) {}

  /** Adds a route group (before start). */
  addRoutes(routes: Hono<AppEnv>): void {
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
    const { host, maxBodyBytes, logger } = this.options;
    const app = new Hono<AppEnv>();
    app.use(async (c, next) => {
      if (!isAcceptedHost(c.req.header("host"), host)) {
        return c.json(
          { error: { code: "HOST_REFUSED", message: "Unrecognized Host header." } },
          421,
        );
      }
      return next();
    });
    app.use(async (c, next) => {
      if (
        isCrossSiteWrite(
          c.req.method,
          c.req.header("origin"),
          c.req.header("host"),
          c.req.header("sec-fetch-site"),
        )
      ) {
        return c.json(
          { error: { code: "CROSS_SITE_REFUSED", message: "Cross-site requests are refused." } },
          403,
        );
      }
      return next();
    });
    app.use(
      bodyLimit({
        maxSize: maxBodyBytes,
        onError: (c) =>
          c.json(
            {
              error: {
                code: "BODY_TOO_LARGE",
                message: `Request body exceeds ${maxBodyBytes} bytes.`,
              },
            },
            413,
          ),
      }),
    );
    for (const routes of this.options.routes) app.route("/", routes);
    app.notFound((c) =>
      c.json(
        { error: { code: "NOT_FOUND", message: `No route for ${c.req.method} ${c.req.path}.` } },
        404,
      ),
    );
    app.onError((err, c) => {
      if (err instanceof GatewayError) {
        return c.json({ error: { code: err.code, message: err.message } }, err.status as 400);
      }
      logger.error({ err, path: c.req.path }, "request failed");
      return c.json({ error: { code: "INTERNAL", message: "Internal error." } }, 500);
    });
    return app;
  }

  /** Listens; resolves with the bound port (useful with port 0). */
  start(): Promise<number> {
    const app = this.buildApp();
    const server = createServer(getRequestListener(app.fetch));
    server.on("upgrade", (req, socket, head) => this.upgrade(req, socket, head));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port, this.options.host, () => {
        server.off("error", reject);
        const address = server.address();
        resolve(typeof address === "object" && address ? address.port : this.options.port);
      });
    });
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const handler = this.options.upgrades?.[path];
    if (!handler || !isAcceptedHost(req.headers.host, this.options.host)) {
      socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n");
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
