/**
 * The `web_search` tool: a query to the configured engine, results as a numbered list of title,
 * URL and snippet the model can follow up with `web_fetch`. Read-only.
 */
import { z } from "zod";
import { defineTool, errorText, toolError } from "../tools/define-tool.js";
import type { Tool } from "../tools/tool.js";
import type { SearchProvider } from "./search-providers.js";

export const DEFAULT_RESULTS = 5;
const MAX_RESULTS = 20;

const schema = z.strictObject({
  query: z.string().trim().min(1).max(400).describe("What to search the web for"),
  count: z
    .number()
    .int()
    .min(1)
    .max(MAX_RESULTS)
    .optional()
    .describe(`How many results (default ${DEFAULT_RESULTS}, at most ${MAX_RESULTS})`),
});

export function createWebSearchTool(provider: SearchProvider): Tool {
  return defineTool({
    name: "web_search",
    description:
      "Search the web. Returns titles, URLs and snippets; read a result in full with web_fetch.",
    schema,
    readOnly: true,
    async run({ query, count }, context) {
      let results: Awaited<ReturnType<SearchProvider["search"]>>;
      try {
        results = await provider.search(query, count ?? DEFAULT_RESULTS, context.signal);
      } catch (error) {
        return toolError(`The search failed: ${errorText(error)}`);
      }
      if (results.length === 0) return { output: `No results for "${query}".`, isError: false };
      const lines = results.map(
        (r, i) => `${i + 1}. ${r.title}\n   ${r.url}${r.snippet ? `\n   ${r.snippet}` : ""}`,
      );
      return {
        output: `Results for "${query}" (${provider.name}):\n\n${lines.join("\n\n")}`,
        isError: false,
      };
    },
  });
}
