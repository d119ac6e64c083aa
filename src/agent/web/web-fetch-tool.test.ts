import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeWeb, startFakeWeb } from "../../../test/fakes/web-server.js";
import type { Tool } from "../tools/tool.js";
import { createAddressRules, type Resolve, systemResolve } from "./address-rules.js";
import { createWebFetchTool } from "./web-fetch-tool.js";

let web: FakeWeb;
const signal = new AbortController().signal;

beforeAll(async () => {
  web = await startFakeWeb();
});
afterAll(async () => {
  await web.close();
});

/** `*.test` names resolve to loopback here (as a hostile DNS answer would); others as usual. */
const testResolve: Resolve = async (host, family) =>
  host.endsWith(".test") ? [{ address: "127.0.0.1", family: 4 }] : systemResolve(host, family);

function fetchTool(
  allowHosts: string[],
  extra: { maxBytes?: number; timeoutMs?: number } = {},
): Tool {
  return createWebFetchTool({
    rules: createAddressRules(allowHosts),
    maxBytes: extra.maxBytes ?? 5 * 1024 * 1024,
    resolve: testResolve,
    ...(extra.timeoutMs && { timeoutMs: extra.timeoutMs }),
  });
}

describe("web_fetch reading pages (fake web allowed by allow_hosts)", () => {
  const tool = () => fetchTool(["127.0.0.1"]);

  it("is read-only (never asks for approval, may re-run after a crash)", () => {
    expect(tool().readOnly).toBe(true);
    expect(tool().name).toBe("web_fetch");
  });

  it("turns an article into Markdown: main content, absolute links, no scripts or styles", async () => {
    const result = await tool().execute({ url: `${web.origin}/article` }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toContain("Title: Otters of the Rhine");
    expect(result.output).toContain("Type: HTML as Markdown");
    expect(result.output).toContain("## Habits");
    expect(result.output).toContain(`[survey report](${web.origin}/report.pdf)`);
    expect(result.output).toContain("[overview](https://example.org/otters)");
    expect(result.output).toMatch(/-\s+Weight: 7 to 12 kg/);
    expect(result.output).not.toContain("SCRIPT_TEXT_MUST_NOT_SHOW");
    expect(result.output).not.toContain("color: red");
  });

  it("extracts the text of a PDF", async () => {
    const result = await tool().execute({ url: `${web.origin}/report.pdf` }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toContain("Type: PDF, 1 page");
    expect(result.output).toContain("Otter survey 2025: 412 animals counted");
  });

  it("passes plain text and JSON through, and names binary content without showing it", async () => {
    const plain = await tool().execute({ url: `${web.origin}/plain` }, { cwd: "/", signal });
    expect(plain.output).toContain("just text, ünïcödé kept");
    const json = await tool().execute({ url: `${web.origin}/data.json` }, { cwd: "/", signal });
    expect(json.output).toContain('{"otters":12,"river":"Rhine"}');
    const image = await tool().execute({ url: `${web.origin}/image.png` }, { cwd: "/", signal });
    expect(image.output).toContain("8 bytes of image/png: not text, not shown");
  });

  it("follows up to 5 redirects and says where it came from; a sixth is refused", async () => {
    const five = await tool().execute({ url: `${web.origin}/redirect?n=5` }, { cwd: "/", signal });
    expect(five.isError).toBe(false);
    expect(five.output).toContain(`URL: ${web.origin}/article`);
    expect(five.output).toContain("Redirected from:");
    const six = await tool().execute({ url: `${web.origin}/redirect?n=6` }, { cwd: "/", signal });
    expect(six.isError).toBe(true);
    expect(six.output).toContain("more than 5 redirects");
  });

  it("marks an HTTP error status as an error and still shows the body", async () => {
    const result = await tool().execute({ url: `${web.origin}/missing` }, { cwd: "/", signal });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("Status: 404");
    expect(result.output).toContain("no such page");
  });

  it("reads at most max_bytes of an endless body and says it cut", async () => {
    const small = fetchTool(["127.0.0.1"], { maxBytes: 100_000 });
    const result = await small.execute({ url: `${web.origin}/flood` }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toContain("longer than 100000 bytes (tools.web.max_bytes)");
    expect(result.output).toContain("showing 20000 of 100000 characters");
  });

  it("cuts the text at max_chars and says so", async () => {
    const result = await tool().execute(
      { url: `${web.origin}/big?bytes=50000`, max_chars: 1000 },
      { cwd: "/", signal },
    );
    expect(result.output).toMatch(/\[cut: showing 1000 of \d+ characters; max_chars up to 200000/);
    expect(result.output).not.toContain("tools.web.max_bytes");
  });

  it("gives up on a body that never ends within the timeout", async () => {
    const slow = fetchTool(["127.0.0.1"], { timeoutMs: 500 });
    const result = await slow.execute({ url: `${web.origin}/endless` }, { cwd: "/", signal });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("no complete answer within 0.5 s");
  });

  it("refuses other schemes and bad URLs with a clear error", async () => {
    const file = await tool().execute({ url: "file:///etc/passwd" }, { cwd: "/", signal });
    expect(file.output).toContain("only http and https URLs can be fetched, not file:");
    const bad = await tool().execute({ url: "not a url" }, { cwd: "/", signal });
    expect(bad.output).toContain("not a valid URL");
  });

  it("connects to the address its own lookup checked (a name only the seam knows)", async () => {
    const byName = fetchTool(["127.0.0.1/32"]);
    const result = await byName.execute(
      { url: `http://site.test:${web.port}/plain` },
      { cwd: "/", signal },
    );
    expect(result.isError).toBe(false);
    expect(result.output).toContain("just text");
  });
});

describe("web_fetch address rules (nothing in allow_hosts)", () => {
  const tool = () => fetchTool([]);
  const port = () => web.port;

  it.each([
    ["127.0.0.1", () => `http://127.0.0.1:${port()}/article`, "127.0.0.1 is a loopback"],
    ["[::1]", () => `http://[::1]:${port()}/article`, "::1 is a loopback"],
    ["[::ffff:127.0.0.1]", () => `http://[::ffff:127.0.0.1]:${port()}/article`, "is a loopback"],
    [
      "169.254.169.254",
      () => "http://169.254.169.254/latest/meta-data/",
      "link-local (cloud metadata)",
    ],
    ["10.0.0.1", () => "http://10.0.0.1/", "10.0.0.1 is a private"],
    ["192.168.1.1 over https", () => "https://192.168.1.1/", "is a private"],
    ["localhost", () => `http://localhost:${port()}/article`, "localhost ("],
    [
      "a name resolving to loopback",
      () => `http://rebind.test:${port()}/article`,
      "rebind.test (127.0.0.1) is a loopback",
    ],
  ])("refuses %s", async (_name, url, message) => {
    const before = web.requests.length;
    const result = await tool().execute({ url: url() }, { cwd: "/", signal });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("Refused:");
    expect(result.output).toContain(message);
    expect(web.requests.length).toBe(before);
  });

  it("refuses a redirect chain from an allowed host that ends in loopback", async () => {
    // allowed.test is exempt by name; the chain then points at 127.0.0.1 and localhost.
    const exempt = fetchTool(["allowed.test"]);
    for (const target of [
      `http://127.0.0.1:${web.port}/article`,
      `http://localhost:${web.port}/article`,
    ]) {
      const start = `http://allowed.test:${web.port}/redirect?n=2`;
      const hop = `http://allowed.test:${web.port}/to?url=${encodeURIComponent(target)}`;
      const ok = await exempt.execute({ url: start }, { cwd: "/", signal });
      expect(ok.isError).toBe(false);
      const before = web.requests.filter((r) => r.startsWith("GET /article")).length;
      const result = await exempt.execute({ url: hop }, { cwd: "/", signal });
      expect(result.isError).toBe(true);
      expect(result.output).toContain("Refused:");
      expect(result.output).toContain("loopback");
      expect(web.requests.filter((r) => r.startsWith("GET /article")).length).toBe(before);
    }
  });
});
