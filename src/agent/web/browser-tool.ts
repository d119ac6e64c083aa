/**
 * The `browser` tool (`tools.web.browser: true`): a headless Chromium page per session the model
 * drives by actions. `open` a URL, `click` and `type` into elements (CSS or Playwright selectors),
 * `read` the page as Markdown, `screenshot` it into the chat, `close` it. The same address rules
 * as `web_fetch` hold for every request the page makes (see guard-proxy.ts). A call that submits
 * a form (`submit: true`) waits for approval under `tools.approval: dangerous`; a click that
 * would submit one without saying so is refused.
 */
import { randomUUID } from "node:crypto";
import { copyFile, mkdir, stat } from "node:fs/promises";
import { isIP } from "node:net";
import { basename, join } from "node:path";
import type { Page } from "playwright-core";
import { z } from "zod";
import { formatSize, mimeOf } from "../media/file-kind.js";
import { defineTool, errorText, toolError } from "../tools/define-tool.js";
import { FILE_PLATFORMS } from "../tools/send-file.js";
import type { Tool, ToolContext, ToolOutput } from "../tools/tool.js";
import { type AddressRules, bareHost, type Resolve, systemResolve } from "./address-rules.js";
import type { BrowserPool, BrowserSession } from "./browser-pool.js";
import { htmlToMarkdown } from "./html-to-markdown.js";

const ACTIONS = ["open", "click", "type", "read", "screenshot", "close"] as const;
const NAVIGATION_TIMEOUT_MS = 30_000;
const ACTION_TIMEOUT_MS = 15_000;
const DEFAULT_READ_CHARS = 12_000;

export interface BrowserToolOptions {
  pool: BrowserPool;
  rules: AddressRules;
  /** Where Keel keeps the copies it sends (`$KEEL_HOME/files`). */
  filesDir: string;
  resolve?: Resolve;
}

const schema = z.strictObject({
  action: z.enum(ACTIONS).describe("What to do"),
  url: z.string().optional().describe("open: the http(s) URL"),
  selector: z
    .string()
    .optional()
    .describe('click, type: the element, as CSS (`input[name="q"]`) or `text=Sign in`'),
  text: z.string().optional().describe("type: the text to put in the field"),
  submit: z
    .boolean()
    .optional()
    .describe("click, type: this submits a form (type presses Enter); asks for approval"),
  max_chars: z.number().int().min(100).max(200_000).optional().describe("read: at most this much"),
});

type Args = z.output<typeof schema>;

export function createBrowserTool(options: BrowserToolOptions): Tool {
  const tool = defineTool({
    name: "browser",
    description:
      "Drive a headless browser page (one per conversation, closed after 5 idle minutes): " +
      "open a URL, click or type into elements by CSS selector or text=…, read the page as " +
      "Markdown, screenshot it into the chat, close it. Set submit: true on the click or type " +
      "that submits a form. Private and local network addresses are refused.",
    schema,
    readOnly: false,
    run: (args, context) => runAction(options, args, context),
  });
  return {
    ...tool,
    dangerReason: (args) =>
      (args as Partial<Args> | null)?.submit === true ? "it submits a form on a web page" : null,
  };
}

async function runAction(
  options: BrowserToolOptions,
  args: Args,
  context: ToolContext,
): Promise<ToolOutput> {
  const key =
    context.sessionId ??
    (context.chat ? `${context.chat.platform}:${context.chat.chatId}` : "default");
  if (args.action === "close") {
    const closed = await options.pool.close(key);
    return {
      output: closed ? "The browser page is closed." : "No browser page was open.",
      isError: false,
    };
  }
  if (args.action !== "open" && !options.pool.has(key)) {
    return toolError("No page is open: start with action open and a url.");
  }
  if (args.action === "open") {
    const refusal = await checkUrl(options, args.url);
    if (refusal) return toolError(refusal);
  }
  const onOpen = (opened: BrowserSession) => saveDownloads(opened, context.cwd);
  return options.pool.use(key, onOpen, async (session) => {
    await options.pool.takeRefusals();
    let result: ToolOutput;
    try {
      result = await act(options, args, session.page, context);
    } catch (error) {
      result = toolError(`browser ${args.action} failed: ${errorText(error)}`);
    }
    const notes: string[] = [];
    const refused = await options.pool.takeRefusals();
    if (refused.length > 0) notes.push(`Blocked requests: ${[...new Set(refused)].join("; ")}`);
    const downloads = session.downloads.splice(0);
    if (downloads.length > 0) {
      notes.push(`Downloaded into the working folder: ${downloads.join(", ")}`);
    }
    if (notes.length === 0) return result;
    return { ...result, output: `${result.output}\n\n${notes.join("\n")}` };
  });
}

async function act(
  options: BrowserToolOptions,
  args: Args,
  page: Page,
  context: ToolContext,
): Promise<ToolOutput> {
  switch (args.action) {
    case "open": {
      const response = await page.goto(args.url!, {
        timeout: NAVIGATION_TIMEOUT_MS,
        waitUntil: "load",
      });
      const status = response?.status() ?? 0;
      const text = await pageText(page, DEFAULT_READ_CHARS);
      return { output: `Status: ${status}\n${text}`, isError: status >= 400 };
    }
    case "click": {
      if (!args.selector) return toolError("click needs a selector.");
      const target = page.locator(args.selector).first();
      const submits = await target.evaluate(submitsForm as never, undefined, {
        timeout: ACTION_TIMEOUT_MS,
      });
      if (submits && args.submit !== true) {
        return toolError(
          `${args.selector} submits a form. If that is intended, call again with submit: true (it may ask for approval).`,
        );
      }
      await target.click({ timeout: ACTION_TIMEOUT_MS });
      await settle(page);
      return { output: await pageSummary(page), isError: false };
    }
    case "type": {
      if (!args.selector || args.text === undefined)
        return toolError("type needs a selector and text.");
      const target = page.locator(args.selector).first();
      await target.fill(args.text, { timeout: ACTION_TIMEOUT_MS });
      if (args.submit === true) {
        await target.press("Enter", { timeout: ACTION_TIMEOUT_MS });
        await settle(page);
      }
      return { output: await pageSummary(page), isError: false };
    }
    case "read":
      return { output: await pageText(page, args.max_chars ?? DEFAULT_READ_CHARS), isError: false };
    case "screenshot":
      return screenshot(options, page, context);
    default:
      return toolError(`Unknown action ${args.action}.`);
  }
}

/** The parts of a DOM element {@link submitsForm} uses (the project compiles without DOM types). */
interface ElementLike {
  closest(selector: string): {
    form: unknown;
    tagName: string;
    getAttribute(name: string): string | null;
  } | null;
}

/** Runs in the page: whether clicking the element submits its form. */
function submitsForm(element: ElementLike): boolean {
  const control = element.closest("button, input");
  if (!control?.form) return false;
  const type = (control.getAttribute("type") ?? "").toLowerCase();
  return control.tagName === "BUTTON"
    ? type === "" || type === "submit"
    : type === "submit" || type === "image";
}

/** Runs in the page: the fields and buttons the model may want to act on, with selectors. */
const CONTROLS = `(() => {
  const out = [];
  for (const el of document.querySelectorAll("input, textarea, select, button")) {
    if (out.length >= 40) break;
    const type = (el.getAttribute("type") || "").toLowerCase();
    if (type === "hidden") continue;
    const name = el.getAttribute("name"), id = el.id;
    const selector = id ? "#" + CSS.escape(id) : name ? el.tagName.toLowerCase() + '[name="' + name + '"]' : null;
    const label = (el.getAttribute("aria-label") || el.getAttribute("placeholder") || el.textContent || el.getAttribute("value") || "").trim().slice(0, 60);
    out.push(el.tagName.toLowerCase() + (type ? "[" + type + "]" : "") + (selector ? " " + selector : "") + (label ? " — " + label : ""));
  }
  return out;
})()`;

async function pageSummary(page: Page): Promise<string> {
  return `URL: ${page.url()}\nTitle: ${await page.title()}`;
}

async function pageText(page: Page, maxChars: number): Promise<string> {
  const html = await page.content();
  const { markdown } = await htmlToMarkdown(html, page.url());
  const found: unknown = await page.evaluate(CONTROLS).catch(() => []);
  const controls = Array.isArray(found) ? (found as string[]) : [];
  let body = markdown;
  let note = "";
  if (body.length > maxChars) {
    note = `\n\n[cut: showing ${maxChars} of ${body.length} characters; read with max_chars for more]`;
    body = body.slice(0, maxChars);
  }
  const fields =
    controls.length > 0
      ? `\n\nFields and buttons:\n${controls.map((c) => `- ${c}`).join("\n")}`
      : "";
  return `${await pageSummary(page)}\n\n${body}${note}${fields}`;
}

/** Waits briefly for a navigation a click or Enter may have started. */
async function settle(page: Page): Promise<void> {
  await page
    .waitForLoadState("domcontentloaded", { timeout: NAVIGATION_TIMEOUT_MS })
    .catch(() => undefined);
}

/** An error message when `url` may not be opened (scheme, or an address the rules refuse). */
async function checkUrl(
  options: BrowserToolOptions,
  url: string | undefined,
): Promise<string | null> {
  if (!url) return "open needs a url.";
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `Not a valid URL: ${url}`;
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return `Only http and https pages can be opened, not ${parsed.protocol}`;
  }
  // The proxy enforces the rule for every request; checking here first gives a clear answer.
  const host = bareHost(parsed.hostname);
  try {
    const addresses = isIP(host)
      ? [{ address: host }]
      : await (options.resolve ?? systemResolve)(host, 0);
    for (const { address } of addresses) {
      const why = options.rules.refusal(parsed.hostname, address);
      if (why) return `Refused: ${why}.`;
    }
  } catch (error) {
    return `Could not resolve ${host}: ${errorText(error)}`;
  }
  return null;
}

async function screenshot(
  options: BrowserToolOptions,
  page: Page,
  context: ToolContext,
): Promise<ToolOutput> {
  const dir = join(context.cwd, "screenshots");
  await mkdir(dir, { recursive: true });
  const name = `screenshot-${new Date().toISOString().replace(/[:.]/g, "-")}.png`;
  const path = join(dir, name);
  await page.screenshot({ path, timeout: ACTION_TIMEOUT_MS });
  const size = (await stat(path)).size;
  const saved = `Saved screenshots/${name} (${formatSize(size)}) of ${page.url()}`;
  if (!context.chat || !FILE_PLATFORMS.has(context.chat.platform)) {
    return { output: `${saved}; this chat cannot receive images.`, isError: false };
  }
  const id = randomUUID();
  await mkdir(options.filesDir, { recursive: true, mode: 0o700 });
  const copy = join(options.filesDir, id);
  await copyFile(path, copy);
  return {
    output: `${saved} and queued it for the chat; link: /files/${id}`,
    isError: false,
    sentFile: { file: { id, path: copy, name, mime: mimeOf(name), size }, caption: page.url() },
  };
}

/** Downloads land in `<cwd>/downloads/`, under the name the site suggests. */
function saveDownloads(session: BrowserSession, cwd: string): void {
  session.page.on("download", (download) => {
    void (async () => {
      const dir = join(cwd, "downloads");
      await mkdir(dir, { recursive: true });
      const name = `${Date.now()}-${basename(download.suggestedFilename()) || "download"}`;
      await download.saveAs(join(dir, name));
      session.downloads.push(`downloads/${name}`);
    })().catch((error: unknown) => {
      // Said at the next action rather than dropped: the model asked for the file.
      session.downloads.push(`(a download failed: ${errorText(error)})`);
    });
  });
}
