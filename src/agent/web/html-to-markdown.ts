/**
 * A web page as Markdown the model can read: the main content (Mozilla's Readability, the
 * algorithm of Firefox's reader view) over linkedom's DOM, written out by turndown; links are
 * kept and made absolute, scripts and styles dropped. The three load on first use, so a gateway
 * that never fetches a page never pays for them.
 */

export interface PageText {
  title: string;
  markdown: string;
}

const DROPPED = ["script", "style", "noscript", "template", "iframe", "svg", "canvas", "form"];

export async function htmlToMarkdown(html: string, pageUrl: string): Promise<PageText> {
  const [{ parseHTML }, { Readability }, { default: TurndownService }] = await Promise.all([
    import("linkedom"),
    import("@mozilla/readability"),
    import("turndown"),
  ]);
  const { document } = parseHTML(html);
  absolutize(document, pageUrl);
  const title = (document.title ?? "").trim();
  // Readability takes the document apart; the fallback needs the untouched body.
  const fallback = document.body?.innerHTML ?? html;
  let content: string | null = null;
  try {
    const article = new Readability(document as never, { keepClasses: false }).parse();
    if (article?.content && (article.textContent ?? "").trim().length > 0)
      content = article.content;
  } catch {
    // A page Readability cannot make sense of is shown whole, less its scripts and styles.
  }
  const turndown = new TurndownService({
    headingStyle: "atx",
    codeBlockStyle: "fenced",
    bulletListMarker: "-",
  });
  turndown.remove(DROPPED as never);
  const { document: part } = parseHTML(
    `<!doctype html><html><body>${content ?? fallback}</body></html>`,
  );
  for (const node of part.querySelectorAll(DROPPED.join(","))) node.remove();
  const markdown = turndown
    .turndown(part.body as never)
    .replace(/\n{3,}/g, "\n\n")
    .trim();
  return { title, markdown };
}

/** Relative links and images resolved against the page (and its `<base href>`, if any). */
function absolutize(
  document: ReturnType<typeof import("linkedom").parseHTML>["document"],
  pageUrl: string,
) {
  let base = pageUrl;
  const baseHref = document.querySelector("base[href]")?.getAttribute("href");
  if (baseHref) {
    try {
      base = new URL(baseHref, pageUrl).href;
    } catch {
      // An unusable <base> is ignored, as browsers do.
    }
  }
  for (const [selector, attribute] of [
    ["a[href]", "href"],
    ["img[src]", "src"],
  ] as const) {
    for (const element of document.querySelectorAll(selector)) {
      const value = element.getAttribute(attribute);
      if (!value || value.startsWith("#")) continue;
      try {
        element.setAttribute(attribute, new URL(value, base).href);
      } catch {
        // Left as written.
      }
    }
  }
}
