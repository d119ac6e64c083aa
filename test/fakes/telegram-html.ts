/**
 * A strict checker for Telegram's `parse_mode: "HTML"` subset, used by the fake Bot API server
 * and by formatter tests. It accepts what https://core.telegram.org/bots/api#html-style allows and
 * reports the first problem with Telegram's wording ("can't parse entities: ...").
 */

export type HtmlCheck = { ok: true; text: string } | { ok: false; error: string };

const SIMPLE_TAGS = new Set([
  "b",
  "strong",
  "i",
  "em",
  "u",
  "ins",
  "s",
  "strike",
  "del",
  "code",
  "pre",
  "tg-spoiler",
  "blockquote",
]);

const NAMED_ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"' };

const TAG_RE =
  /^<(\/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+))?)*)\s*>/;
const ATTR_RE = /([a-zA-Z-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?/g;
const ENTITY_RE = /^&(?:#(\d{1,7})|#x([0-9a-fA-F]{1,6})|([a-zA-Z]+));/;

function parseAttributes(source: string): Map<string, string> {
  const attrs = new Map<string, string>();
  for (const match of source.matchAll(ATTR_RE)) {
    attrs.set(match[1]!.toLowerCase(), match[2] ?? match[3] ?? match[4] ?? "");
  }
  return attrs;
}

/** Why an opening tag is not allowed here, or null when it is. */
function checkOpenTag(name: string, attrs: Map<string, string>, stack: string[]): string | null {
  const parent = stack[stack.length - 1];
  if (parent === "code") return `Can't use tag "${name}" inside a code entity`;
  if (parent === "pre" && name !== "code") return `Can't use tag "${name}" inside a pre entity`;
  if (name === "a") return attrs.has("href") ? null : 'Tag "a" must have attribute "href"';
  if (name === "span") {
    return attrs.get("class") === "tg-spoiler" ? null : 'Tag "span" must have class "tg-spoiler"';
  }
  return SIMPLE_TAGS.has(name) ? null : `Unsupported start tag "${name}"`;
}

/**
 * Checks `html` against Telegram's HTML rules: only the supported tags, properly nested and
 * closed, `<`/`>`/`&` escaped outside tags, only `&lt; &gt; &amp; &quot;` and numeric entities.
 * Returns the visible text on success.
 */
export function checkTelegramHtml(html: string): HtmlCheck {
  const stack: string[] = [];
  let text = "";
  let i = 0;
  const fail = (reason: string): HtmlCheck => ({
    ok: false,
    error: `Bad Request: can't parse entities: ${reason} at byte offset ${i}`,
  });
  while (i < html.length) {
    const ch = html[i]!;
    if (ch === "<") {
      const match = TAG_RE.exec(html.slice(i, i + 2048));
      if (!match) return fail("Unexpected character '<'");
      const closing = match[1] === "/";
      const name = match[2]!.toLowerCase();
      if (closing) {
        if (stack[stack.length - 1] !== name) return fail(`Unexpected end tag "${name}"`);
        stack.pop();
      } else {
        const problem = checkOpenTag(name, parseAttributes(match[3] ?? ""), stack);
        if (problem) return fail(problem);
        stack.push(name);
      }
      i += match[0].length;
    } else if (ch === "&") {
      const match = ENTITY_RE.exec(html.slice(i, i + 16));
      if (!match) return fail("Character '&' must be escaped");
      if (match[3] !== undefined) {
        const named = NAMED_ENTITIES[match[3].toLowerCase()];
        if (named === undefined) return fail(`Unsupported HTML entity "&${match[3]};"`);
        text += named;
      } else {
        const code = match[1] !== undefined ? Number(match[1]) : Number.parseInt(match[2]!, 16);
        if (code > 0x10ffff) return fail("Wrong character code");
        text += String.fromCodePoint(code);
      }
      i += match[0].length;
    } else if (ch === ">") {
      return fail("Character '>' must be escaped");
    } else {
      text += ch;
      i += 1;
    }
  }
  if (stack.length > 0) {
    return fail(`Can't find end tag corresponding to start tag "${stack[stack.length - 1]}"`);
  }
  return { ok: true, text };
}
