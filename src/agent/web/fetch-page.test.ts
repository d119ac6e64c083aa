import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeWeb, startFakeWeb } from "../../../test/fakes/web-server.js";
import { createAddressRules, type Resolve } from "./address-rules.js";
import { fetchPage } from "./fetch-page.js";

let web: FakeWeb;
beforeAll(async () => {
  web = await startFakeWeb();
});
afterAll(async () => {
  await web.close();
});

/** Every `*.test` name is the stand-in web on 127.0.0.1. */
const resolve: Resolve = async () => [{ address: "127.0.0.1", family: 4 }];
const options = {
  rules: createAddressRules(["a.test", "b.test"]),
  maxBytes: 100_000,
  timeoutMs: 10_000,
  signal: new AbortController().signal,
  resolve,
  headers: { "x-provider-key": "secret-key" },
};

describe("fetchPage headers across redirects", () => {
  it("keeps the caller's headers on a same-origin redirect", async () => {
    const start = `http://a.test:${web.port}/to?url=${encodeURIComponent("/headers")}`;
    const page = await fetchPage(start, options);
    expect(JSON.parse(page.body.toString())["x-provider-key"]).toBe("secret-key");
  });

  it("drops them when a redirect leaves for another origin", async () => {
    const target = `http://b.test:${web.port}/headers`;
    const start = `http://a.test:${web.port}/to?url=${encodeURIComponent(target)}`;
    const page = await fetchPage(start, options);
    expect(page.url).toBe(target);
    const seen = JSON.parse(page.body.toString()) as Record<string, string>;
    expect(seen.host).toBe(`b.test:${web.port}`);
    expect(seen).not.toHaveProperty("x-provider-key");
  });
});

describe("fetchPage methods across redirects", () => {
  const post = { ...options, method: "POST" as const, body: "q=otter" };

  it("keeps a POST and its body through a 307", async () => {
    const page = await fetchPage(`http://a.test:${web.port}/to-307?url=/method`, post);
    expect(page.body.toString()).toBe("POST q=otter");
  });

  it("turns a POST into a GET through a 301", async () => {
    const page = await fetchPage(`http://a.test:${web.port}/to?url=/method`, post);
    expect(page.body.toString()).toBe("GET ");
  });
});
