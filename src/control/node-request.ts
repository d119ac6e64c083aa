/**
 * A request's JSON body and its client's hang-up, read from Node's own request and response where
 * the gateway serves them (`@hono/node-server` passes both as bindings).
 *
 * Touching `c.req.raw` makes the server build a full web `Request` around Node's request: a web
 * stream over the body, an AbortController, a Headers object. On Node 20 every web stream also
 * carries a native transferable handle, which V8's young-generation collections treat as alive:
 * each API turn's request objects were promoted to the old generation and stayed there until the
 * next full collection, a few seconds later. Reading Node's request directly skips all of it.
 * In-process tests (`app.request()`) have no bindings and take the web `Request`, as do bodies
 * another handler has begun to read.
 */
import { text } from "node:stream/consumers";
import type { Context } from "hono";
import type { AppEnv } from "./access-gate.js";
import { httpError } from "./http-errors.js";

/** Parses a JSON body; malformed JSON is a 400 with a clear message. */
export async function readJson(c: Context<AppEnv>): Promise<unknown> {
  const text = await readText(c);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw httpError("BAD_JSON");
  }
}

/**
 * Calls `onGone` once if the client hangs up before its answer is written; returns a function
 * that stops listening.
 */
export function onClientGone(c: Context<AppEnv>, onGone: () => void): () => void {
  const outgoing = c.env?.outgoing;
  if (!outgoing) {
    const signal = c.req.raw.signal;
    signal.addEventListener("abort", onGone, { once: true });
    return () => signal.removeEventListener("abort", onGone);
  }
  const onClose = () => {
    if (!outgoing.writableFinished) onGone();
  };
  outgoing.once("close", onClose);
  return () => outgoing.off("close", onClose);
}

/** An AbortSignal that fires when the client hangs up before its answer is written. */
export function clientGoneSignal(c: Context<AppEnv>): AbortSignal {
  if (!c.env?.outgoing) return c.req.raw.signal;
  const gone = new AbortController();
  onClientGone(c, () => gone.abort());
  return gone.signal;
}

async function readText(c: Context<AppEnv>): Promise<string> {
  const incoming = c.env?.incoming;
  // Only a body of a declared length: the body-size limit checked that length, while a chunked
  // body is counted by the limit as the web Request reads it. Only a body nothing has started
  // reading, either (the web Request takes over Node's stream as it is built).
  const direct =
    incoming !== undefined &&
    incoming.headers["content-length"] !== undefined &&
    incoming.headers["transfer-encoding"] === undefined &&
    incoming.readableFlowing === null &&
    !incoming.readableDidRead;
  return direct ? text(incoming) : c.req.raw.text();
}
