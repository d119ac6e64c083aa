/**
 * `fetch` over Node's own http and https modules, instead of the web `fetch` Node ships, for the
 * model client and grammY (docs/architecture.md, "The model client's HTTP"): the request body goes
 * out as the string it is; a streamed answer (a completion) comes back through one web stream
 * instead of several, an answer of known length (JSON) as one buffer once it has all arrived.
 * Connections are kept alive by Node's global agents. String bodies (all the chat client sends,
 * and grammY's JSON calls) and Node streams (grammY's file uploads) take this path; any other body
 * goes to the web `fetch`.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { pipeline, Readable } from "node:stream";
import { buffer } from "node:stream/consumers";

/** Statuses whose Response may carry no body. */
const NULL_BODY = new Set([204, 205, 304]);

export function createNodeFetch(): typeof fetch {
  return (input, init) => {
    const body: unknown = init?.body;
    const streamed = body instanceof Readable;
    if (body !== undefined && body !== null && typeof body !== "string" && !streamed) {
      return fetch(input, init);
    }
    const url = new URL(input instanceof Request ? input.url : input);
    const https = url.protocol === "https:";
    const signal = init?.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(url, {
        method: init?.method ?? "GET",
        headers: Object.fromEntries(new Headers(init?.headers)),
        ...(signal && { signal }),
      });
      // Kept, not once: the socket can fail after the answer began, and a settled promise
      // ignores the call where an unheard "error" would end the process.
      req.on("error", (error) => reject(signal?.aborted ? abortReason(signal) : error));
      req.once("response", (res) => {
        if (!isWholeAnswer(res)) {
          settle(resolve, reject, () => toResponse(res, chunksOf(res, signal)), res);
          return;
        }
        // An answer of known size that is not an event stream (JSON, an error page) is read here
        // and handed over as one buffer: a web stream pulled from Node's stream cost more than
        // the call itself for a small answer.
        buffer(res).then(
          (whole) => settle(resolve, reject, () => toResponse(res, whole), res),
          (error: unknown) => reject(bodyFailure(error, signal)),
        );
      });
      // A Node stream (grammY's multipart upload) is piped: the web fetch refuses one on Node 24
      // (it asks for `duplex`).
      if (streamed) {
        // Heard before the request's own failure, so the call fails with the stream's error.
        body.once("error", reject);
        // Either side failing destroys the other: a request cut off closes the file it was
        // uploading.
        pipeline(body, req, () => {});
      } else {
        req.end(body ?? undefined);
      }
    });
  };
}

/**
 * True for an answer sent with its length and not as an event stream. Anything else streams:
 * a completion can take minutes and its caller watches it arrive.
 */
function isWholeAnswer(res: IncomingMessage): boolean {
  return (
    res.headers["content-length"] !== undefined &&
    !(res.headers["content-type"] ?? "").startsWith("text/event-stream")
  );
}

/** Resolves with `make()`, or rejects when the web Response refuses what it was given. */
function settle(
  resolve: (response: Response) => void,
  reject: (error: unknown) => void,
  make: () => Response,
  res: IncomingMessage,
): void {
  try {
    resolve(make());
  } catch (error) {
    // A status or header the web Response refuses (a status outside 200–599).
    res.destroy();
    reject(error);
  }
}

function toResponse(res: IncomingMessage, body: Buffer | AsyncIterable<Uint8Array>): Response {
  const status = res.statusCode ?? 502;
  const headers = new Headers();
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  }
  const empty = NULL_BODY.has(status);
  if (empty) res.resume();
  // Node's Response takes an async iterable as its body (a non-standard BodyInit, hence the cast).
  return new Response(empty ? null : (body as unknown as BodyInit), {
    status,
    statusText: res.statusMessage ?? "",
    headers,
  });
}

/** How a body that failed fails for the web fetch: the abort's reason, or a network TypeError. */
function bodyFailure(error: unknown, signal: AbortSignal | undefined): unknown {
  return signal?.aborted ? abortReason(signal) : new TypeError("terminated", { cause: error });
}

/** The abort's reason; an AbortError for a signal without one (grammY's polyfilled signals). */
function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

type BodyInit = ConstructorParameters<typeof Response>[0];

/**
 * The body's chunks. It fails as the web fetch's does: with the abort reason when aborted, with a
 * TypeError when cut off; cancelled, it closes the connection. Once the body has ended, failed or
 * been cancelled it lets go of Node's answer, and through it of the request, its body and its
 * signal (a finished generator would keep them): on Node 20 the web stream reading this outlives
 * young-generation collections, and took every object of the call into the old generation with it
 * (docs/architecture.md, "The model client's HTTP"). Exported for its test.
 */
export function chunksOf(
  res: Readable,
  signal: AbortSignal | undefined,
): AsyncIterable<Uint8Array> {
  let answer: Readable | null = res;
  let source: AsyncIterator<Uint8Array> | null = res[Symbol.asyncIterator]();
  let callSignal = signal;
  const release = () => {
    answer = null;
    source = null;
    callSignal = undefined;
  };
  const iterator: AsyncIterator<Uint8Array> = {
    async next() {
      if (!source) return { done: true, value: undefined };
      try {
        const step = await source.next();
        if (step.done) release();
        return step;
      } catch (error) {
        const failure = bodyFailure(error, callSignal);
        release();
        throw failure;
      }
    },
    async return() {
      // Destroyed here, not left to Node's iterator: one not started yet (a body cancelled before
      // its first read, as the client does before a retry) would never close the connection.
      const held = answer;
      release();
      held?.destroy();
      return { done: true, value: undefined };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}
