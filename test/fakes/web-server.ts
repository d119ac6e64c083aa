/**
 * A stand-in web on a loopback socket for the web tools: an article page, a redirect chain, a
 * redirect into a private address, a slow endless body, a page larger than any cap, a PDF made
 * on the spot, plain text and JSON, and search APIs shaped like SearXNG, Brave and Tavily (which
 * record the keys they were sent).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeWeb {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  port: number;
  /** Requests seen, as `METHOD path`. */
  requests: string[];
  /** Headers of each search API call (to check keys went to the provider, and only there). */
  searchHeaders: Record<string, string | string[] | undefined>[];
  /** Query strings or bodies of each search API call. */
  searchQueries: string[];
  close(): Promise<void>;
}

export const ARTICLE_HTML = `<!doctype html>
<html><head><title>Otters of the Rhine</title>
<style>body { color: red }</style>
<script>window.secret = "SCRIPT_TEXT_MUST_NOT_SHOW";</script>
</head><body>
<nav><a href="/">Home</a> <a href="/about">About</a></nav>
<article>
<h1>Otters of the Rhine</h1>
<p>The Eurasian otter returned to the Rhine in the 1990s, after decades away. Water quality
improved, fish came back, and the otters followed them upstream from the Netherlands.</p>
<p>Counts along the river show a slow but steady rise. Read the <a href="/report.pdf">survey
report</a> for the numbers, or the <a href="https://example.org/otters">overview</a>.</p>
<h2>Habits</h2>
<p>Otters hunt at dusk and at night, mostly fish, sometimes frogs and crayfish. Each animal keeps
a stretch of river several kilometres long, marked with spraints on stones and roots.</p>
<ul><li>Weight: 7 to 12 kg</li><li>Length: about 1 m with the tail</li></ul>
</article>
<footer>Footer text</footer>
</body></html>`;

/** A one-page PDF whose text is `text` (ASCII), with a correct cross-reference table. */
export function tinyPdf(text: string): Buffer {
  const stream = `BT /F1 18 Tf 40 100 Td (${text}) Tj ET`;
  const objects = [
    "<< /Type /Catalog /Pages 2 0 R >>",
    "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 200] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
    `<< /Length ${stream.length} >>\nstream\n${stream}\nendstream`,
    "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
  ];
  let out = "%PDF-1.4\n";
  const offsets: number[] = [];
  objects.forEach((body, index) => {
    offsets.push(out.length);
    out += `${index + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

/** A large article page of about `bytes` bytes (paragraphs of prose). */
export function bigHtml(bytes: number): string {
  const paragraph =
    "<p>Rivers carry sediment from the mountains to the sea, and every bend sorts it by size: " +
    "gravel where the current is fast, sand where it slows, silt in the quiet water behind bars.</p>\n";
  const count = Math.ceil(bytes / paragraph.length);
  return `<!doctype html><html><head><title>Big page</title></head><body><article><h1>Big page</h1>\n${paragraph.repeat(count)}</article></body></html>`;
}

export async function startFakeWeb(options: { privateTarget?: string } = {}): Promise<FakeWeb> {
  const requests: string[] = [];
  const searchHeaders: FakeWeb["searchHeaders"] = [];
  const searchQueries: string[] = [];
  const open = new Set<ServerResponse>();
  let origin = "";
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests.push(`${req.method} ${req.url}`);
    open.add(res);
    res.on("close", () => open.delete(res));
    const url = new URL(req.url ?? "/", origin);
    const send = (status: number, type: string, body: string | Buffer) => {
      res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
      res.end(body);
    };
    switch (url.pathname) {
      case "/article":
        return send(200, "text/html; charset=utf-8", ARTICLE_HTML);
      case "/plain":
        return send(200, "text/plain; charset=utf-8", "just text, ünïcödé kept\n");
      case "/data.json":
        return send(200, "application/json", JSON.stringify({ otters: 12, river: "Rhine" }));
      case "/report.pdf":
        return send(200, "application/pdf", tinyPdf("Otter survey 2025: 412 animals counted"));
      case "/form":
        return send(
          200,
          "text/html",
          `<!doctype html><html><head><title>Form page</title></head><body><h1>Find otters</h1>
<form action="/submitted" method="get"><input name="q" placeholder="Search"><button>Go</button></form>
<p><a href="/article">Read the article</a> or <a href="/download">download the data</a>.</p></body></html>`,
        );
      case "/submitted":
        return send(
          200,
          "text/html",
          `<!doctype html><html><head><title>Submitted</title></head><body><p>You searched for ${(url.searchParams.get("q") ?? "").replace(/[<&]/g, "")}.</p></body></html>`,
        );
      case "/leaky": {
        // A page that tries to make the browser reach a private address behind the tool's back.
        const target = url.searchParams.get("target") ?? "";
        return send(
          200,
          "text/html",
          `<!doctype html><html><head><title>Leaky</title></head><body><p>Leaky page.</p><img src="${target}/secret.png"><script>fetch("${target}/secret-fetch").catch(() => {});</script></body></html>`,
        );
      }
      case "/download":
        res.writeHead(200, {
          "content-type": "text/csv",
          "content-disposition": 'attachment; filename="otters.csv"',
        });
        return res.end("river,otters\nRhine,12\n");
      case "/to-307": {
        res.writeHead(307, { location: url.searchParams.get("url") ?? "/" });
        return res.end();
      }
      case "/method": {
        let body = "";
        req.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        req.on("end", () => send(200, "text/plain", `${req.method} ${body}`));
        return;
      }
      case "/headers":
        return send(200, "application/json", JSON.stringify(req.headers));
      case "/missing":
        return send(404, "text/plain", "no such page");
      case "/image.png":
        return send(200, "image/png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]));
      case "/big": {
        const size = Number(url.searchParams.get("bytes") ?? 1_000_000);
        return send(200, "text/html; charset=utf-8", bigHtml(size));
      }
      case "/redirect": {
        // /redirect?n=3 → /redirect?n=2 → … → /article
        const n = Number(url.searchParams.get("n") ?? 1);
        res.writeHead(302, { location: n > 1 ? `/redirect?n=${n - 1}` : "/article" });
        return res.end();
      }
      case "/to": {
        res.writeHead(301, { location: url.searchParams.get("url") ?? "/" });
        return res.end();
      }
      case "/to-private": {
        res.writeHead(302, { location: options.privateTarget ?? "http://127.0.0.1:1/" });
        return res.end();
      }
      case "/endless": {
        // A body that trickles forever: only a timeout (or the byte cap) ends the fetch.
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("start\n");
        const timer = setInterval(() => res.write("more\n"), 50);
        res.on("close", () => clearInterval(timer));
        return;
      }
      case "/flood": {
        // An endless body as fast as the socket takes it: only the byte cap ends the fetch.
        res.writeHead(200, { "content-type": "text/plain" });
        const chunk = Buffer.alloc(64 * 1024, "x");
        const pump = () => {
          while (res.write(chunk)) {
            if (res.destroyed) return;
          }
          res.once("drain", pump);
        };
        pump();
        return;
      }
      case "/searxng/search": {
        searchHeaders.push(req.headers);
        searchQueries.push(url.search);
        return send(
          200,
          "application/json",
          JSON.stringify({
            query: url.searchParams.get("q"),
            results: [
              {
                title: "Otter - Wikipedia",
                url: "https://en.wikipedia.org/wiki/Otter",
                content: "Otters are carnivorous mammals.",
              },
              {
                title: "Rhine otters",
                url: "https://example.org/rhine",
                content: "Back since the 1990s.",
              },
              { title: "Third", url: "https://example.org/3", content: "Third result." },
            ],
          }),
        );
      }
      case "/brave/res/v1/web/search": {
        searchHeaders.push(req.headers);
        searchQueries.push(url.search);
        if (req.headers["x-subscription-token"] !== "brave-secret-key") {
          return send(401, "application/json", JSON.stringify({ error: "bad key" }));
        }
        return send(
          200,
          "application/json",
          JSON.stringify({
            web: {
              results: [
                {
                  title: "Brave otter",
                  url: "https://example.org/brave",
                  description: "An <strong>otter</strong> page.",
                },
              ],
            },
          }),
        );
      }
      case "/tavily/search": {
        let body = "";
        req.on("data", (chunk: Buffer) => {
          body += chunk.toString();
        });
        req.on("end", () => {
          searchHeaders.push(req.headers);
          searchQueries.push(body);
          const parsed = JSON.parse(body || "{}") as { api_key?: string };
          const auth = req.headers.authorization;
          if (auth !== "Bearer tavily-secret-key" && parsed.api_key !== "tavily-secret-key") {
            return send(401, "application/json", JSON.stringify({ error: "bad key" }));
          }
          send(
            200,
            "application/json",
            JSON.stringify({
              results: [
                {
                  title: "Tavily otter",
                  url: "https://example.org/tavily",
                  content: "Tavily says otters.",
                },
              ],
            }),
          );
        });
        return;
      }
      default:
        return send(404, "text/plain", "not found");
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    port,
    requests,
    searchHeaders,
    searchQueries,
    async close() {
      for (const res of open) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
