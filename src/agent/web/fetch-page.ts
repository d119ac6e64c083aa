/**
 * One guarded HTTP GET for the web tools: http(s) only, every hop (the first and each of at most
 * five redirects) checked against the address rules at connect time, the body read up to a byte
 * cap, the whole exchange bounded by a timeout. Plain `fetch` cannot do this: its connections
 * resolve names where no check can reach.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import {
  type AddressRules,
  guardedLookup,
  RefusedAddressError,
  type Resolve,
  refusalOfLiteral,
} from "./address-rules.js";

export const MAX_REDIRECTS = 5;

export interface FetchOptions {
  rules: AddressRules;
  maxBytes: number;
  timeoutMs: number;
  signal: AbortSignal;
  /** Name resolution (tests give their own; default the system's). */
  resolve?: Resolve;
  /** Extra request headers (e.g. a search provider's key). Never shown to the model. */
  headers?: Record<string, string>;
  method?: "GET" | "POST";
  body?: string;
}

export interface FetchedPage {
  /** The URL that answered, after redirects. */
  url: string;
  status: number;
  contentType: string;
  body: Buffer;
  /** True when the body was longer than `maxBytes` and only its start was read. */
  cut: boolean;
  /** The URLs redirected from, in order. */
  redirects: string[];
}

/** Fetches `url`; throws a readable error (RefusedAddressError for a refused address). */
export async function fetchPage(url: string, options: FetchOptions): Promise<FetchedPage> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout]);
  const lookup = guardedLookup(options.rules, options.resolve);
  const redirects: string[] = [];
  let current = parseWebUrl(url);
  let method = options.method ?? "GET";
  let body = options.body;
  let headers = options.headers ?? {};
  try {
    for (;;) {
      checkLiteral(options.rules, current);
      const response = await send(current, method, body, headers, lookup, signal);
      const location = response.headers.location;
      if (
        response.statusCode &&
        response.statusCode >= 300 &&
        response.statusCode < 400 &&
        location
      ) {
        response.resume();
        if (redirects.length >= MAX_REDIRECTS) {
          throw new Error(`more than ${MAX_REDIRECTS} redirects (last to ${location})`);
        }
        redirects.push(current.href);
        const next = parseWebUrl(new URL(location, current).href);
        // A key meant for one site is not handed to the next (as browsers drop Authorization).
        if (next.origin !== current.origin) headers = {};
        current = next;
        // 303, and 301/302 after a POST, turn into a GET as browsers do; 307/308 keep the method.
        const status = response.statusCode;
        if (status === 303 || ((status === 301 || status === 302) && method === "POST")) {
          method = "GET";
          body = undefined;
        }
        continue;
      }
      const { bytes, cut } = await readCapped(response, options.maxBytes, signal);
      return {
        url: current.href,
        status: response.statusCode ?? 0,
        contentType: String(response.headers["content-type"] ?? ""),
        body: bytes,
        cut,
        redirects,
      };
    }
  } catch (error) {
    if (timeout.aborted && !options.signal.aborted) {
      throw new Error(`no complete answer within ${options.timeoutMs / 1000} s`);
    }
    throw error;
  }
}

/** An http(s) URL, or a readable error. */
function parseWebUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`not a valid URL: ${text}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`only http and https URLs can be fetched, not ${url.protocol}`);
  }
  if (url.username || url.password) url.username = url.password = "";
  return url;
}

function checkLiteral(rules: AddressRules, url: URL): void {
  const why = refusalOfLiteral(rules, url.hostname);
  if (why) throw new RefusedAddressError(why);
}

function send(
  url: URL,
  method: string,
  body: string | undefined,
  headers: Record<string, string>,
  lookup: ReturnType<typeof guardedLookup>,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  const https = url.protocol === "https:";
  // A fresh agent per hop: no pooled socket from another host (or another check) is reused.
  const agent = https ? new HttpsAgent({ lookup }) : new HttpAgent({ lookup });
  const request = https ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = request(
      url,
      {
        method,
        agent,
        signal,
        headers: {
          "user-agent": "Keel web_fetch (+https://github.com/keel)",
          accept: "text/html,application/xhtml+xml,application/pdf,text/*;q=0.9,*/*;q=0.8",
          // Identity only: the byte cap then counts what is read, and no zip bomb can expand.
          "accept-encoding": "identity",
          ...headers,
        },
      },
      resolve,
    );
    outgoing.on("error", reject);
    outgoing.end(body);
  });
}

async function readCapped(
  response: IncomingMessage,
  maxBytes: number,
  signal: AbortSignal,
): Promise<{ bytes: Buffer; cut: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  signal.throwIfAborted();
  const onAbort = () => response.destroy(signal.reason as Error);
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    for await (const chunk of response as AsyncIterable<Buffer>) {
      const room = maxBytes - size;
      if (chunk.length > room) {
        // Past the cap: keep what fits and stop reading; the rest is never downloaded.
        if (room > 0) chunks.push(chunk.subarray(0, room));
        response.destroy();
        return { bytes: Buffer.concat(chunks), cut: true };
      }
      chunks.push(chunk);
      size += chunk.length;
    }
    return { bytes: Buffer.concat(chunks), cut: false };
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
