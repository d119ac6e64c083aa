/** The web tools the config asks for: `web_fetch` always; the others only when configured. */
import type { Config } from "../../config/schema.js";
import type { Tool } from "../tools/tool.js";
import { createAddressRules } from "./address-rules.js";
import { createWebFetchTool } from "./web-fetch-tool.js";

export function createWebTools(web: Config["tools"]["web"]): Tool[] {
  const rules = createAddressRules(web.allow_hosts);
  return [createWebFetchTool({ rules, maxBytes: web.max_bytes })];
}
