/**
 * Model Markdown to Telegram HTML, and splitting long output into messages Telegram accepts.
 * Pure functions. Telegram limits a message to 4096 UTF-16 code units
 * (https://core.telegram.org/bots/api#sendmessage) and rejects HTML that is not balanced
 * (https://core.telegram.org/bots/api#html-style).
 */

/** Telegram's message length limit in UTF-16 code units. */
export const TELEGRAM_MESSAGE_LIMIT = 4096;

/** Longer link targets are left as text, so re-opened tags stay small when a message is split. */
const MAX_HREF_CHARS = 1000;
const SAFE_HREF = /^(?:https?:\/\/|mailto:|tg:\/\/)/i;
const PLACEHOLDER_OPEN = "\uE000";
const PLACEHOLDER_CLOSE = "\uE001";
const PLACEHOLDER_RE = /\uE000(\d+)\uE001/g;

/** Escapes text for Telegram HTML (`&`, `<`, `>`; quotes too, so it is safe in attributes). */
export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

const ENTITIES: Record<string, string> = { lt: "<", gt: ">", amp: "&", quot: '"' };

/** Strips tags and decodes entities: what the user would see, as plain text. */
export function htmlToPlainText(html: string): string {
  return html
    .replace(/<[^>]*>/g, "")
    .replace(/&(?:#(\d+)|#x([0-9a-fA-F]+)|([a-zA-Z]+));/g, (whole, dec, hex, name) => {
      if (dec !== undefined) return String.fromCodePoint(Number(dec));
      if (hex !== undefined) return String.fromCodePoint(Number.parseInt(hex, 16));
      return ENTITIES[String(name).toLowerCase()] ?? whole;
    });
}

/** True when the tags in `fragment` open and close in order (so wrapping it keeps HTML valid). */
function isBalanced(fragment: string): boolean {
  const stack: string[] = [];
  for (const match of fragment.matchAll(/<(\/?)([a-z-]+)[^>]*>/g)) {
    if (match[1] === "/") {
      if (stack.pop() !== match[2]) return false;
    } else {
      stack.push(match[2]!);
    }
  }
  return stack.length === 0;
}

const EMPHASIS: [RegExp, string][] = [
  [/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, "b"],
  [/(?<![\p{L}\p{N}_])__(?=\S)(.+?)(?<=\S)__(?![\p{L}\p{N}_])/gu, "b"],
  [/~~(?=\S)(.+?)(?<=\S)~~/g, "s"],
  [/(?<![\p{L}\p{N}*\\])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\p{L}\p{N}*])/gu, "i"],
  [/(?<![\p{L}\p{N}_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\p{L}\p{N}_])/gu, "i"],
];

/** Applies bold/italic/strike to already-escaped text; a span that would cross a tag is left as is. */
function applyEmphasis(escaped: string): string {
  let out = escaped;
  for (const [pattern, tag] of EMPHASIS) {
    out = out.replace(pattern, (whole, inner: string) =>
      isBalanced(inner) ? `<${tag}>${inner}</${tag}>` : whole,
    );
  }
  return out;
}

/** Formats one line of Markdown (no block syntax) as Telegram HTML. */
function formatInline(line: string): string {
  const held: string[] = [];
  const hold = (html: string): string => {
    held.push(html);
    return `${PLACEHOLDER_OPEN}${held.length - 1}${PLACEHOLDER_CLOSE}`;
  };
  let text = line.replace(/(`+)(?!`)(.+?)(?<!`)\1(?!`)/g, (_whole, _ticks, code: string) =>
    hold(`<code>${escapeHtml(code.trim() === "" ? code : code.replace(/^ (.*) $/, "$1"))}</code>`),
  );
  text = text.replace(
    /\[([^\]\n]+)\]\(\s*<?([^\s)>]+)>?(?:\s+"[^"]*")?\s*\)/g,
    (whole, label: string, href: string) => {
      if (!SAFE_HREF.test(href) || href.length > MAX_HREF_CHARS) return whole;
      return hold(`<a href="${escapeHtml(href)}">${applyEmphasis(escapeHtml(label))}</a>`);
    },
  );
  let html = applyEmphasis(escapeHtml(text));
  // Link labels may hold code placeholders, so restore until none are left.
  while (PLACEHOLDER_RE.test(html)) {
    html = html.replace(PLACEHOLDER_RE, (_whole, index: string) => held[Number(index)] ?? "");
  }
  return html;
}

function formatCodeBlock(code: string, language: string): string {
  const body = escapeHtml(code);
  if (language === "") return `<pre>${body}</pre>`;
  return `<pre><code class="language-${language}">${body}</code></pre>`;
}

/**
 * Converts model Markdown to Telegram HTML: **bold**, *italic*, `code`, fenced code blocks
 * (`<pre><code class="language-x">`), [links](https://...), ~~strike~~, headings as bold.
 * Lists and everything else stay as text, with `<`, `>` and `&` escaped, so model output can
 * never inject markup. The result is always balanced HTML.
 */
export function markdownToTelegramHtml(markdown: string): string {
  const lines = markdown
    .replace(/[\uE000\uE001]/g, "")
    .replace(/\r\n?/g, "\n")
    .split("\n");
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      const marker = fence[1]!;
      const code: string[] = [];
      let j = i + 1;
      while (j < lines.length && !isFenceClose(lines[j]!, marker)) code.push(lines[j++]!);
      out.push(formatCodeBlock(code.join("\n"), fence[2] ?? ""));
      i = j;
      continue;
    }
    const heading = /^ {0,3}#{1,6}\s+(.+?)(?:\s+#+)?\s*$/.exec(line);
    out.push(heading ? `<b>${formatInline(heading[1]!)}</b>` : formatInline(line));
  }
  return out.join("\n");
}

function isFenceClose(line: string, marker: string): boolean {
  const trimmed = line.trim();
  return trimmed.length >= marker.length && trimmed === marker[0]!.repeat(trimmed.length);
}

type Atom =
  | { kind: "open"; text: string; name: string }
  | { kind: "close"; text: string; name: string }
  | { kind: "text"; text: string };

const ATOM_RE =
  /<(\/?)([a-zA-Z][a-zA-Z0-9-]*)[^>]*>|&[#a-zA-Z0-9]+;|[\uD800-\uDBFF][\uDC00-\uDFFF]|[\s\S]/g;

function tokenize(html: string): Atom[] {
  const atoms: Atom[] = [];
  for (const match of html.matchAll(ATOM_RE)) {
    const name = match[2]?.toLowerCase();
    if (name === undefined) atoms.push({ kind: "text", text: match[0] });
    else atoms.push({ kind: match[1] === "/" ? "close" : "open", text: match[0], name });
  }
  return atoms;
}

function applyAtom(stack: Atom[], atom: Atom): void {
  if (atom.kind === "open") stack.push(atom);
  else if (atom.kind === "close") stack.pop();
}

function closers(stack: Atom[]): string {
  return stack
    .map((a) => `</${a.kind === "text" ? "" : a.name}>`)
    .reverse()
    .join("");
}

const EMPTY_PAIR = /<([a-z-]+)(?:\s[^>]*)?><\/\1>/g;

function dropEmptyElements(html: string): string {
  let out = html;
  while (EMPTY_PAIR.test(out)) out = out.replace(EMPTY_PAIR, "");
  return out;
}

type Kind = "paragraph" | "line" | "word";

interface Cut {
  end: number;
  resume: number;
  length: number;
  kind: Kind;
}

/** Where a boundary ends at atom `j` (a newline or space just accepted), if it is one. */
function boundaryAt(atoms: Atom[], j: number, start: number, length: number): Cut | null {
  const text = atoms[j]!.text;
  if (text === "\n") {
    const paragraph = j > start && atoms[j - 1]!.text === "\n";
    return paragraph
      ? { end: j - 1, resume: j + 1, length, kind: "paragraph" }
      : { end: j, resume: j + 1, length, kind: "line" };
  }
  if (text === " ") return { end: j, resume: j + 1, length, kind: "word" };
  return null;
}

/** Picks the cut for a piece: the latest paragraph, line or word boundary past half the limit. */
function chooseCut(cuts: Cut[], fitEnd: number, start: number, limit: number): Cut {
  for (const kind of ["paragraph", "line", "word"] as const) {
    for (let k = cuts.length - 1; k >= 0; k--) {
      const cut = cuts[k]!;
      if (cut.kind === kind && cut.length >= limit / 2) return cut;
    }
  }
  const latest = cuts.findLast((c) => c.end > start);
  if (latest) return latest;
  const end = Math.max(fitEnd, start + 1);
  return { end, resume: end, length: 0, kind: "word" };
}

/**
 * Splits Telegram HTML into pieces of at most `limit` UTF-16 units, each valid HTML on its own:
 * tags open at a cut are closed at the end of one piece and re-opened at the start of the next.
 * Cuts prefer paragraph, then line, then word boundaries (the boundary whitespace is dropped),
 * never fall inside a tag, entity or surrogate pair. Input must be balanced HTML with short tags
 * (as produced by {@link markdownToTelegramHtml}).
 */
export function splitMessage(html: string, limit = TELEGRAM_MESSAGE_LIMIT): string[] {
  if (html.length <= limit) return html.trim() === "" ? [] : [html];
  const atoms = tokenize(html);
  const pieces: string[] = [];
  let stack: Atom[] = [];
  let i = 0;
  while (i < atoms.length) {
    const prefix = stack.map((a) => a.text).join("");
    const local = [...stack];
    let length = prefix.length;
    let closeLength = closers(local).length;
    const cuts: Cut[] = [];
    let j = i;
    for (; j < atoms.length; j++) {
      const atom = atoms[j]!;
      let nextClose = closeLength;
      if (atom.kind !== "text") {
        const next = [...local];
        applyAtom(next, atom);
        nextClose = closers(next).length;
      }
      if (length + atom.text.length + nextClose > limit) break;
      length += atom.text.length;
      closeLength = nextClose;
      applyAtom(local, atom);
      if (atom.kind === "text") {
        const cut = boundaryAt(atoms, j, i, length);
        if (cut) cuts.push(cut);
      }
    }
    const cut: Cut =
      j >= atoms.length
        ? { end: j, resume: j, length, kind: "word" }
        : chooseCut(cuts, j, i, limit);
    const body = atoms.slice(i, cut.end);
    const endStack = [...stack];
    for (const atom of body) applyAtom(endStack, atom);
    const piece = dropEmptyElements(prefix + body.map((a) => a.text).join("") + closers(endStack));
    if (htmlToPlainText(piece).trim() !== "") pieces.push(piece);
    stack = endStack;
    i = cut.resume;
  }
  return pieces;
}

/**
 * Splits plain text into pieces of at most `limit` UTF-16 units, preferring paragraph, then line,
 * then word boundaries (dropping the boundary whitespace) and never splitting a surrogate pair.
 */
export function splitPlainText(text: string, limit = TELEGRAM_MESSAGE_LIMIT): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let end = -1;
    let skip = 0;
    for (const [separator, width] of [
      ["\n\n", 2],
      ["\n", 1],
      [" ", 1],
    ] as const) {
      const at = rest.lastIndexOf(separator, limit);
      if (at >= limit / 2) {
        end = at;
        skip = width;
        break;
      }
    }
    if (end < 0) {
      end = limit;
      const code = rest.charCodeAt(end - 1);
      if (code >= 0xd800 && code <= 0xdbff) end -= 1;
    }
    const piece = rest.slice(0, end);
    if (piece.trim() !== "") pieces.push(piece);
    rest = rest.slice(end + skip);
  }
  if (rest.trim() !== "") pieces.push(rest);
  return pieces;
}
