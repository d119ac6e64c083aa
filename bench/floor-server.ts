/**
 * The floor the API figures are judged against: an in-memory forwarder with no storage, no
 * sessions and no framework, in front of the same stand-in model through the same `openai`
 * client Keel uses. Whatever Keel adds on top of this is the price of what it promises.
 *
 * Run as a child: `node --import tsx bench/floor-server.ts PORT MODEL_BASE_URL`.
 */
import { createServer } from "node:http";
import OpenAI from "openai";
import pino from "pino";
import { startMemorySettle } from "../src/lifecycle/memory-settle.js";

const [port, baseURL] = process.argv.slice(2);
const model = new OpenAI({ baseURL, apiKey: "floor", maxRetries: 0 });
let inFlight = 0;
startMemorySettle({ logger: pino({ level: "silent" }), isIdle: () => inFlight === 0 });

const server = createServer((req, res) => {
  if (req.method === "GET" && req.url === "/readyz") {
    res.writeHead(200).end("ok");
    return;
  }
  const chunks: Buffer[] = [];
  inFlight += 1;
  res.on("close", () => {
    inFlight -= 1;
  });
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
      model: string;
      messages: OpenAI.ChatCompletionMessageParam[];
    };
    model.chat.completions
      .create({ model: body.model, messages: body.messages })
      .then((completion) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(completion));
      })
      .catch((error: unknown) => {
        res.writeHead(502).end(String(error));
      });
  });
});
server.listen(Number(port), "127.0.0.1");
