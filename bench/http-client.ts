/**
 * A lean keep-alive HTTP client for load generation (node:http, not fetch: undici's per-request
 * overhead would be measured as the gateway's). One agent per target, sockets reused.
 */
import { Agent, request } from "node:http";
import { performance } from "node:perf_hooks";

export interface PostResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  /** Request start to the last byte of the body, in ms. */
  ms: number;
}

/** A client bound to one base URL (`http://127.0.0.1:PORT`). Call `close()` at the end. */
export class HttpClient {
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 256 });
  private readonly host: string;
  private readonly port: number;

  /** `headers` go with every request (the gateway's control token). */
  constructor(
    baseUrl: string,
    private readonly headers: Record<string, string> = {},
  ) {
    const url = new URL(baseUrl);
    this.host = url.hostname;
    this.port = Number(url.port);
  }

  /** POSTs JSON to `path` and reads the whole answer. Rejects on network errors only. */
  postJson(path: string, body: unknown, headers: Record<string, string> = {}): Promise<PostResult> {
    return this.post(path, body, headers, null);
  }

  /**
   * POSTs JSON to a streaming endpoint; resolves, once the whole answer is read (the socket goes
   * back to the pool), with the ms from request start to the first received chunk whose text
   * `first` accepts (NaN when none did).
   */
  postStream(path: string, body: unknown, first: (text: string) => boolean): Promise<PostResult> {
    return this.post(path, body, {}, first);
  }

  /** One POST: `ms` is the whole answer's time, or with `first` the time to the chunk it accepts. */
  private post(
    path: string,
    body: unknown,
    headers: Record<string, string>,
    first: ((text: string) => boolean) | null,
  ): Promise<PostResult> {
    const payload = JSON.stringify(body);
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.host,
          port: this.port,
          path,
          method: "POST",
          agent: this.agent,
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(payload),
            ...this.headers,
            ...headers,
          },
        },
        (res) => {
          let at = Number.NaN;
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => {
            chunks.push(c);
            if (first && Number.isNaN(at) && first(c.toString("utf8"))) {
              at = performance.now() - started;
            }
          });
          res.on("end", () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString("utf8"),
              ms: first ? at : performance.now() - started,
            }),
          );
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  }

  /** GETs `path`; resolves with the status (body discarded). Rejects on network errors. */
  getStatus(path: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.host, port: this.port, path, method: "GET", agent: this.agent },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  /** GETs `path` with the client's headers, reading the whole body; resolves with status and ms. */
  get(path: string): Promise<{ status: number; ms: number; bytes: number }> {
    const started = performance.now();
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.host,
          port: this.port,
          path,
          method: "GET",
          agent: this.agent,
          headers: this.headers,
        },
        (res) => {
          let bytes = 0;
          res.on("data", (c: Buffer) => {
            bytes += c.length;
          });
          res.on("end", () =>
            resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, bytes }),
          );
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
