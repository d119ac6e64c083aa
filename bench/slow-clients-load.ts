/**
 * The load of the `slow-clients` section, in a child process of its own so that neither the
 * stand-in model's streaming nor the slow readers' pacing runs on the event loop that times the
 * normal sessions: the stand-in model (test/fakes/openai-server.ts), which answers `long` with
 * `--deltas` pieces of `--piece` each and anything else at once; and, when told, the slow
 * clients: each streams one `/v1/chat/completions` answer and reads it at `readBytes` per
 * `readEveryMs` (it pauses its response after each chunk for as long as the chunk's share of that
 * pace), counting the events it gets and whether the stream ended with `[DONE]` or was cut off.
 *
 * Run by bench/slow-clients.ts: `fork("bench/slow-clients-load.ts", [deltas, piece])` under tsx;
 * messages in: `start`, `status`, `stop`; out: `model`, `started`, `status`, `stopped`.
 */
import { type IncomingMessage, request } from "node:http";
import { lastUserText, startFakeOpenAI } from "../test/fakes/openai-server.js";

export interface SlowStart {
  type: "start";
  baseUrl: string;
  token: string;
  clients: number;
  readBytes: number;
  readEveryMs: number;
}

export interface SlowStatus {
  /** Clients whose stream is open (headers received, neither ended nor cut off). */
  reading: number;
  /** Streams read to `[DONE]`. */
  complete: number;
  /** Streams the gateway closed before `[DONE]`. */
  cutOff: number;
  /** Requests that failed before a stream began. */
  failed: number;
  /** Server-sent events (chunks) in the completed streams, each. */
  eventsPerComplete: number[];
  /** Bytes read by all clients. */
  bytesRead: number;
}

export type LoadMessage =
  | { type: "model"; baseUrl: string }
  | { type: "started" }
  | ({ type: "status" } & SlowStatus)
  | ({ type: "stopped" } & SlowStatus);

interface Client {
  state: "connecting" | "reading" | "complete" | "cutOff" | "failed" | "stopped";
  events: number;
  stop: () => void;
}

const [deltas = "50000", piece = "tok "] = process.argv.slice(2);
const pieces = Array.from({ length: Number(deltas) }, () => piece);
const model = await startFakeOpenAI({ model: "bench-model" });
model.script((req) =>
  lastUserText(req).startsWith("long") ? { pieces } : { text: `ok: ${lastUserText(req)}` },
);
const clients: Client[] = [];
let bytesRead = 0;
const send = (message: LoadMessage) => process.send!(message);
send({ type: "model", baseUrl: model.baseUrl });

/** One slow client: a stream read at `bytesPerMs` from the first byte to the last. */
function slowClient(start: SlowStart, onOpen: () => void): Client {
  const url = new URL(start.baseUrl);
  const client: Client = { state: "connecting", events: 0, stop: () => {} };
  const bytesPerMs = start.readBytes / start.readEveryMs;
  const body = JSON.stringify({
    model: "bench-model",
    messages: [{ role: "user", content: "long answer, please" }],
    stream: true,
  });
  const req = request(
    {
      host: url.hostname,
      port: Number(url.port),
      path: "/v1/chat/completions",
      method: "POST",
      agent: false,
      headers: {
        authorization: `Bearer ${start.token}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
      },
    },
    (res: IncomingMessage) => {
      client.state = "reading";
      onOpen();
      let tail = "";
      let sawDone = false;
      res.on("data", (chunk: Buffer) => {
        bytesRead += chunk.length;
        // Events end with a blank line; the two characters before this chunk close one too.
        const text = tail + chunk.toString("latin1");
        client.events += text.split("\n\n").length - 1;
        sawDone ||= text.includes("data: [DONE]");
        tail = text.slice(-12);
        if (tail.endsWith("\n\n")) tail = "";
        res.pause();
        setTimeout(() => res.resume(), chunk.length / bytesPerMs);
      });
      res.on("end", () => {
        if (client.state === "reading") client.state = sawDone ? "complete" : "cutOff";
      });
      res.on("error", () => {});
      res.on("close", () => {
        if (client.state === "reading") client.state = sawDone ? "complete" : "cutOff";
      });
      client.stop = () => {
        if (client.state === "reading") client.state = "stopped";
        res.destroy();
      };
    },
  );
  req.on("error", () => {
    if (client.state === "connecting") {
      client.state = "failed";
      onOpen();
    }
  });
  req.end(body);
  return client;
}

function status(): SlowStatus {
  const count = (state: Client["state"]) => clients.filter((c) => c.state === state).length;
  return {
    reading: count("reading"),
    complete: count("complete"),
    cutOff: count("cutOff"),
    failed: count("failed"),
    eventsPerComplete: clients.filter((c) => c.state === "complete").map((c) => c.events),
    bytesRead,
  };
}

process.on("message", (message: SlowStart | { type: "status" | "stop" }) => {
  if (message.type === "start") {
    let open = 0;
    for (let i = 0; i < message.clients; i += 1) {
      clients.push(
        slowClient(message, () => {
          open += 1;
          if (open === message.clients) send({ type: "started" });
        }),
      );
    }
  } else if (message.type === "status") {
    send({ type: "status", ...status() });
  } else {
    // What the clients had when told to stop, then they hang up.
    const last = status();
    for (const client of clients) client.stop();
    send({ type: "stopped", ...last });
    void model.close();
  }
});
