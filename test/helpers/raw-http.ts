/**
 * HTTP requests as an attacker sends them: any Host header (fetch cannot set one), and raw
 * WebSocket upgrades whose answer is read as a status code instead of a connection.
 */
import { randomBytes } from "node:crypto";
import { request } from "node:http";

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/**
 * One request to 127.0.0.1:`port`; `headers.host` defaults to `127.0.0.1:<port>`. The body goes
 * with its Content-Length, or in two chunks without one when `chunked` is set.
 */
export function rawRequest(
  port: number,
  options: {
    method?: string;
    path: string;
    headers?: Record<string, string>;
    body?: string;
    chunked?: boolean;
    /** The client's own address (any of 127.0.0.0/8 on Linux). */
    localAddress?: string;
  },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        ...(options.localAddress !== undefined && { localAddress: options.localAddress }),
        method: options.method ?? "GET",
        path: options.path,
        headers: { host: `127.0.0.1:${port}`, ...options.headers },
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (options.chunked && options.body !== undefined) req.write(options.body.slice(0, 3));
    req.end(options.chunked ? options.body?.slice(3) : options.body);
  });
}

/**
 * A WebSocket upgrade of `/ws` (or `path`) offering the `keel.v1` subprotocol; resolves with 101
 * when the server took it over (the socket is closed at once) or with the refusal's status.
 */
export function rawUpgrade(
  port: number,
  headers: Record<string, string> = {},
  path = "/ws",
): Promise<{ status: number; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path,
      headers: {
        host: `127.0.0.1:${port}`,
        connection: "Upgrade",
        upgrade: "websocket",
        "sec-websocket-version": "13",
        "sec-websocket-key": randomBytes(16).toString("base64"),
        "sec-websocket-protocol": "keel.v1",
        ...headers,
      },
    });
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    });
    req.on("response", (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    });
    req.on("error", reject);
    req.end();
  });
}
