/**
 * `fetch` over Node's own http and https modules, instead of the web `fetch` Node ships, for the
 * model client and grammY (docs/architecture.md, "The model client's HTTP"): the request body goes
 * out as the string it is, and the answer streams through one web stream instead of several.
 * Connections are kept alive by Node's global agents. Only string bodies (all the chat client
 * sends, and grammY's JSON calls) take this path; any other body (grammY's file uploads) goes to
 * the web `fetch`.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";

/** Statuses whose Response may carry no body. */
const NULL_BODY = new Set([204, 205, 304]);

export function createNodeFetch(): typeof fetch {
  return (input, init) => {
    const body = init?.body;
    if (body !== undefined && body !== null && typeof body !== "string") return fetch(input, init);
    const url = new URL(input instanceof Request ? input.url : input);
    const https = url.protocol === "https:";
    return new Promise<Response>((resolve, reject) => {
      const req = (https ? httpsRequest : httpRequest)(url, {
        method: init?.method ?? "GET",
        headers: Object.fromEntries(new Headers(init?.headers)),
        ...(init?.signal && { signal: init.signal }),
      });
      // Kept, not once: the socket can fail after the answer began, and a settled promise
      // ignores the call where an unheard "error" would end the process.
      req.on("error", reject);
      req.once("response", (res) => {
        try {
          resolve(toResponse(res, init?.signal ?? undefined));
        } catch (error) {
          // A status or header the web Response refuses (a status outside 200–599).
          res.destroy();
          reject(error);
        }
      });
      req.end(body ?? undefined);
    });
  };
}

function toResponse(res: IncomingMessage, signal: AbortSignal | undefined): Response {
  const status = res.statusCode ?? 502;
  const headers = new Headers();
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    headers.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
  }
  const empty = NULL_BODY.has(status);
  if (empty) res.resume();
  // Node's Response takes an async iterable as its body (a non-standard BodyInit, hence the cast).
  const body = empty ? null : (chunksOf(res, signal) as unknown as BodyInit);
  return new Response(body, { status, statusText: res.statusMessage ?? "", headers });
}

type BodyInit = ConstructorParameters<typeof Response>[0];

/**
 * The body's chunks. It fails as the web fetch's does: with the abort reason when aborted, with a
 * TypeError when cut off.
 */
async function* chunksOf(
  res: IncomingMessage,
  signal: AbortSignal | undefined,
): AsyncGenerator<Uint8Array> {
  try {
    for await (const chunk of res) yield chunk as Buffer;
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw new TypeError("terminated", { cause: error });
  }
}
