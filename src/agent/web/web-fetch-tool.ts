/**
 * The `web_fetch` tool: one URL read as text the model can use. HTML becomes Markdown, PDFs
 * their text, plain text and JSON pass through; what was cut (bytes past `tools.web.max_bytes`,
 * characters past `max_chars`) is said at the end. Read-only: it may be re-run after a crash, and
 * it never waits for approval.
 */
import { z } from "zod";
import { defineTool, errorText, toolError } from "../tools/define-tool.js";
import type { Tool } from "../tools/tool.js";
import { type AddressRules, RefusedAddressError, type Resolve } from "./address-rules.js";
import { type FetchedPage, fetchPage } from "./fetch-page.js";
import { htmlToMarkdown } from "./html-to-markdown.js";
import { pdfText } from "./pdf-text.js";

export const DEFAULT_MAX_CHARS = 20_000;
const MAX_CHARS_LIMIT = 200_000;
export const FETCH_TIMEOUT_MS = 30_000;

export interface WebFetchToolOptions {
  rules: AddressRules;
  maxBytes: number;
  timeoutMs?: number;
  resolve?: Resolve;
}

const schema = z.strictObject({
  url: z.string().min(1).describe("The http(s) URL to read"),
  max_chars: z
    .number()
    .int()
    .min(100)
    .max(MAX_CHARS_LIMIT)
    .optional()
    .describe(`Characters of text to return at most (default ${DEFAULT_MAX_CHARS})`),
});

export function createWebFetchTool(options: WebFetchToolOptions): Tool {
  return defineTool({
    name: "web_fetch",
    description:
      "Read a web page or file by URL (http or https). HTML comes back as Markdown of the main " +
      "content with links kept; PDFs as their text; plain text and JSON as they are. Private " +
      "and local network addresses are refused.",
    schema,
    readOnly: true,
    async run({ url, max_chars }, context) {
      let page: FetchedPage;
      try {
        page = await fetchPage(url, {
          rules: options.rules,
          maxBytes: options.maxBytes,
          timeoutMs: options.timeoutMs ?? FETCH_TIMEOUT_MS,
          signal: context.signal,
          ...(options.resolve && { resolve: options.resolve }),
        });
      } catch (error) {
        if (error instanceof RefusedAddressError) return toolError(`Refused: ${error.message}.`);
        return toolError(`Could not fetch ${url}: ${errorText(error)}`);
      }
      const { title, text, kind } = await readable(page);
      const limit = max_chars ?? DEFAULT_MAX_CHARS;
      const notes: string[] = [];
      if (page.cut) {
        notes.push(
          `[cut: the response is longer than ${options.maxBytes} bytes (tools.web.max_bytes); only its start was read]`,
        );
      }
      let body = text;
      if (body.length > limit) {
        notes.push(
          `[cut: showing ${limit} of ${body.length} characters; max_chars up to ${MAX_CHARS_LIMIT} shows more]`,
        );
        body = body.slice(0, limit);
      }
      const head = [
        `URL: ${page.url}`,
        ...(page.redirects.length > 0 ? [`Redirected from: ${page.redirects.join(" → ")}`] : []),
        `Status: ${page.status}`,
        `Type: ${kind}`,
        ...(title ? [`Title: ${title}`] : []),
      ];
      const output = [head.join("\n"), body, ...notes].filter(Boolean).join("\n\n");
      return { output, isError: page.status >= 400 };
    },
  });
}

/** The body as text, by what it is (the Content-Type, else the first bytes). */
async function readable(page: FetchedPage): Promise<{ title: string; text: string; kind: string }> {
  const type = page.contentType.split(";")[0]!.trim().toLowerCase();
  const start = page.body.subarray(0, 512).toString("latin1");
  if (type === "application/pdf" || start.startsWith("%PDF-")) {
    if (page.cut) return { title: "", text: "", kind: "PDF (too large to read whole)" };
    const pdf = await pdfText(page.body);
    return {
      title: "",
      text: pdf.text,
      kind: `PDF, ${pdf.pages} page${pdf.pages === 1 ? "" : "s"}`,
    };
  }
  const text = decode(page.body, page.contentType);
  if (
    type === "text/html" ||
    type === "application/xhtml+xml" ||
    (!type && /<html|<!doctype html/i.test(start))
  ) {
    const { title, markdown } = await htmlToMarkdown(text, page.url);
    return { title, text: markdown, kind: "HTML as Markdown" };
  }
  if (
    !type ||
    type.startsWith("text/") ||
    /[/+](json|xml|javascript|ecmascript|csv|yaml)$/.test(type) ||
    type === "application/x-ndjson"
  ) {
    return { title: "", text, kind: type || "text" };
  }
  return {
    title: "",
    text: `(${page.body.length} bytes of ${type}: not text, not shown)`,
    kind: type,
  };
}

/** Bytes as text in the charset the Content-Type names (UTF-8 when none or unknown). */
function decode(body: Buffer, contentType: string): string {
  const charset = /charset="?([^";\s]+)/i.exec(contentType)?.[1];
  try {
    return new TextDecoder(charset ?? "utf-8").decode(body);
  } catch {
    return new TextDecoder("utf-8").decode(body);
  }
}
