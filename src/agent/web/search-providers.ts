/**
 * Search engines behind `web_search`, one shape for all: a query in, titles, URLs and snippets
 * out. The key of a keyed engine lives in the provider and goes only into its request headers:
 * never into the tool's arguments, its output or the journal.
 */
import type { Config } from "../../config/schema.js";
import { createAddressRules } from "./address-rules.js";
import { fetchPage } from "./fetch-page.js";

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

export interface SearchProvider {
  /** Shown in the tool's output (`searxng`, `brave`, `tavily`). */
  name: string;
  search(query: string, count: number, signal: AbortSignal): Promise<SearchResult[]>;
}

type SearchConfig = NonNullable<Config["tools"]["web"]["search"]>;

const DEFAULT_URLS = {
  brave: "https://api.search.brave.com",
  tavily: "https://api.tavily.com",
} as const;

const SEARCH_TIMEOUT_MS = 20_000;
/** Search answers are a few KB; this only bounds a misbehaving engine. */
const SEARCH_MAX_BYTES = 2 * 1024 * 1024;

export function createSearchProvider(config: SearchConfig): SearchProvider {
  const base = (config.url ?? DEFAULT_URLS[config.provider as keyof typeof DEFAULT_URLS]).replace(
    /\/+$/,
    "",
  );
  // The engine is the operator's choice (often a SearXNG on the same host or network): its host
  // is exempt from the private-address rule; anything it redirects to elsewhere is not.
  const rules = createAddressRules([new URL(base).hostname.replace(/^\[|\]$/g, "")]);
  const key = config.api_key ?? "";
  const call = async (
    url: string,
    signal: AbortSignal,
    init: { headers?: Record<string, string>; body?: string } = {},
  ): Promise<unknown> => {
    const page = await fetchPage(url, {
      rules,
      maxBytes: SEARCH_MAX_BYTES,
      timeoutMs: SEARCH_TIMEOUT_MS,
      signal,
      headers: { accept: "application/json", ...init.headers },
      ...(init.body !== undefined && { method: "POST" as const, body: init.body }),
    });
    const text = page.body.toString("utf8");
    if (page.status >= 400) {
      throw new Error(
        `${config.provider} answered HTTP ${page.status}: ${hide(text.slice(0, 300), key)}`,
      );
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${config.provider} did not answer JSON (is its JSON output enabled?)`);
    }
  };
  switch (config.provider) {
    case "searxng":
      return {
        name: "searxng",
        async search(query, count, signal) {
          const url = `${base}/search?${new URLSearchParams({ q: query, format: "json" })}`;
          const body = (await call(url, signal)) as { results?: unknown[] };
          return pick(body.results, count, "content");
        },
      };
    case "brave":
      return {
        name: "brave",
        async search(query, count, signal) {
          const params = new URLSearchParams({ q: query, count: String(count) });
          const body = (await call(`${base}/res/v1/web/search?${params}`, signal, {
            headers: { "x-subscription-token": key },
          })) as { web?: { results?: unknown[] } };
          return pick(body.web?.results, count, "description");
        },
      };
    case "tavily":
      return {
        name: "tavily",
        async search(query, count, signal) {
          const body = (await call(`${base}/search`, signal, {
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({ query, max_results: count }),
          })) as { results?: unknown[] };
          return pick(body.results, count, "content");
        },
      };
  }
}

/** The first `count` well-formed results; snippets without markup (Brave marks matches). */
function pick(results: unknown[] | undefined, count: number, snippetKey: string): SearchResult[] {
  const out: SearchResult[] = [];
  for (const item of results ?? []) {
    if (out.length >= count) break;
    const r = item as Record<string, unknown>;
    if (typeof r.url !== "string") continue;
    out.push({
      title: text(r.title) || r.url,
      url: r.url,
      snippet: text(r[snippetKey]),
    });
  }
  return out;
}

function text(value: unknown): string {
  if (typeof value !== "string") return "";
  return value
    .replace(/<[^>]*>/g, "")
    .replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) =>
      e === "amp" ? "&" : e === "lt" ? "<" : e === "gt" ? ">" : e === "quot" ? '"' : "'",
    )
    .replace(/\s+/g, " ")
    .trim();
}

/** An engine's error text with the key blanked, should the engine echo it. */
function hide(message: string, key: string): string {
  return key ? message.split(key).join("***") : message;
}
