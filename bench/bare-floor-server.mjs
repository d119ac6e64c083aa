/**
 * The bare floor (issue 42): the least a forwarder can do for a turn. `node:http` in, `node:http`
 * with keep-alive out to the model, each session's history in memory, no storage, no framework,
 * no SDK. Plain JavaScript, so plain `node` runs it (no tsx in its start-up or memory).
 *
 * Run as a child: `node bench/bare-floor-server.mjs PORT MODEL_BASE_URL`.
 */
import { randomUUID } from "node:crypto";
import { Agent, createServer, request } from "node:http";

const [port, baseUrl] = process.argv.slice(2);
const model = new URL(`${baseUrl.replace(/\/$/, "")}/chat/completions`);
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
/** Session id → the messages so far. */
const histories = new Map();

function askModel(body) {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: model.hostname,
        port: model.port,
        path: model.pathname,
        method: "POST",
        agent,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(payload),
        },
      },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString("utf8") }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/readyz") {
    res.writeHead(200).end("ok");
    return;
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    const sessionId = req.headers["x-session-id"] || randomUUID();
    const history = histories.get(sessionId) ?? [];
    histories.set(sessionId, history);
    history.push(body.messages[body.messages.length - 1]);
    askModel({ model: body.model, messages: history })
      .then(({ status, text }) => {
        if (status === 200) history.push(JSON.parse(text).choices[0].message);
        res.writeHead(status, { "content-type": "application/json", "x-session-id": sessionId });
        res.end(text);
      })
      .catch((error) => res.writeHead(502).end(String(error)));
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), "127.0.0.1");
