/**
 * The web tools the config asks for: `web_fetch` always; `web_search` and `browser` only when
 * configured (a tool that can only fail is not offered).
 */
import type { Config } from "../../config/schema.js";
import type { Tool } from "../tools/tool.js";
import { createAddressRules } from "./address-rules.js";
import { BrowserPool } from "./browser-pool.js";
import { createBrowserTool } from "./browser-tool.js";
import { createSearchProvider } from "./search-providers.js";
import { createWebFetchTool } from "./web-fetch-tool.js";
import { createWebSearchTool } from "./web-search-tool.js";

export interface WebTools {
  tools: Tool[];
  /** Closes the browsers (the gateway stops); nothing to do when none was opened. */
  close(): Promise<void>;
}

export function createWebTools(
  web: Config["tools"]["web"],
  options: { filesDir: string },
): WebTools {
  const rules = createAddressRules(web.allow_hosts);
  const tools = [createWebFetchTool({ rules, maxBytes: web.max_bytes })];
  if (web.search) tools.push(createWebSearchTool(createSearchProvider(web.search)));
  let pool: BrowserPool | null = null;
  if (web.browser) {
    pool = new BrowserPool({ executablePath: web.browser_executable, rules });
    tools.push(createBrowserTool({ pool, rules, filesDir: options.filesDir }));
  }
  return { tools, close: async () => pool?.closeAll() };
}
