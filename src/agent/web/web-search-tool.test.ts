import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeWeb, startFakeWeb } from "../../../test/fakes/web-server.js";
import { ConfigSchema } from "../../config/schema.js";
import { createSearchProvider } from "./search-providers.js";
import { createWebSearchTool } from "./web-search-tool.js";
import { createWebTools } from "./web-tools.js";

let web: FakeWeb;
const signal = new AbortController().signal;

beforeAll(async () => {
  web = await startFakeWeb();
});
afterAll(async () => {
  await web.close();
});

/** `tools.web` as the config loader would produce it from `input`. */
function webConfig(input: unknown) {
  return ConfigSchema.parse({ tools: { web: input } }).tools.web;
}

describe("web_search", () => {
  it("asks SearXNG for JSON and lists title, URL and snippet, at most count", async () => {
    const search = webConfig({ search: { provider: "searxng", url: `${web.origin}/searxng/` } })
      .search!;
    const tool = createWebSearchTool(createSearchProvider(search));
    expect(tool.readOnly).toBe(true);
    const result = await tool.execute({ query: "rhine otters", count: 2 }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toBe(
      'Results for "rhine otters" (searxng):\n\n' +
        "1. Otter - Wikipedia\n   https://en.wikipedia.org/wiki/Otter\n   Otters are carnivorous mammals.\n\n" +
        "2. Rhine otters\n   https://example.org/rhine\n   Back since the 1990s.",
    );
    expect(web.searchQueries.at(-1)).toBe("?q=rhine+otters&format=json");
  });

  it("sends the Brave key as its header only, never in the output", async () => {
    const search = webConfig({
      search: { provider: "brave", url: `${web.origin}/brave`, api_key: "brave-secret-key" },
    }).search!;
    const tool = createWebSearchTool(createSearchProvider(search));
    const result = await tool.execute({ query: "otter" }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toContain(
      "1. Brave otter\n   https://example.org/brave\n   An otter page.",
    );
    expect(web.searchHeaders.at(-1)?.["x-subscription-token"]).toBe("brave-secret-key");
    expect(web.searchQueries.at(-1)).toBe("?q=otter&count=5");
    expect(JSON.stringify(tool.parameters)).not.toContain("brave-secret-key");
    expect(result.output).not.toContain("brave-secret-key");
  });

  it("reports a refused key as an error without echoing it", async () => {
    const search = webConfig({
      search: { provider: "brave", url: `${web.origin}/brave`, api_key: "wrong-key" },
    }).search!;
    const result = await createWebSearchTool(createSearchProvider(search)).execute(
      { query: "otter" },
      { cwd: "/", signal },
    );
    expect(result.isError).toBe(true);
    expect(result.output).toContain("brave answered HTTP 401");
    expect(result.output).not.toContain("wrong-key");
  });

  it("posts to Tavily with the key as a Bearer header", async () => {
    const search = webConfig({
      search: { provider: "tavily", url: `${web.origin}/tavily`, api_key: "tavily-secret-key" },
    }).search!;
    const tool = createWebSearchTool(createSearchProvider(search));
    const result = await tool.execute({ query: "otter", count: 3 }, { cwd: "/", signal });
    expect(result.isError).toBe(false);
    expect(result.output).toContain(
      "1. Tavily otter\n   https://example.org/tavily\n   Tavily says otters.",
    );
    expect(web.searchHeaders.at(-1)?.authorization).toBe("Bearer tavily-secret-key");
    expect(JSON.parse(web.searchQueries.at(-1)!)).toEqual({ query: "otter", max_results: 3 });
  });

  it("is offered only with a provider configured", () => {
    expect(
      createWebTools(webConfig({}), { filesDir: "/nonexistent" }).tools.map((t) => t.name),
    ).toEqual(["web_fetch"]);
    const configured = webConfig({ search: { provider: "searxng", url: "http://127.0.0.1:1" } });
    expect(
      createWebTools(configured, { filesDir: "/nonexistent" }).tools.map((t) => t.name),
    ).toEqual(["web_fetch", "web_search"]);
  });

  it("rejects a provider without what it needs, and bad allow_hosts, when the config loads", () => {
    const error = (input: unknown) =>
      ConfigSchema.safeParse({ tools: { web: input } }).error?.message;
    expect(error({ search: { provider: "searxng" } })).toContain("searxng needs url");
    expect(error({ search: { provider: "brave" } })).toContain("brave and tavily need api_key");
    expect(error({ search: { provider: "bing", url: "http://x" } })).toBeDefined();
    expect(error({ allow_hosts: ["10.0.0.0/33"] })).toContain("must be a host name");
    expect(error({ allow_hosts: ["http://wiki"] })).toContain("must be a host name");
    expect(error({ allow_hosts: ["wiki.lan", "10.0.0.0/8", "fd00::/8", "::1"] })).toBeUndefined();
  });
});
