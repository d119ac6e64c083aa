/**
 * The web tools the config asks for: `web_fetch` always; `web_search` only with a provider
 * configured (a tool that can only fail is not offered).
 */
import type { Config } from "../../config/schema.js";
import type { Tool } from "../tools/tool.js";
import { createAddressRules } from "./address-rules.js";
import { createSearchProvider } from "./search-providers.js";
import { createWebFetchTool } from "./web-fetch-tool.js";
import { createWebSearchTool } from "./web-search-tool.js";

export function createWebTools(web: Config["tools"]["web"]): Tool[] {
  const rules = createAddressRules(web.allow_hosts);
  const tools = [createWebFetchTool({ rules, maxBytes: web.max_bytes })];
  if (web.search) tools.push(createWebSearchTool(createSearchProvider(web.search)));
  return tools;
}
