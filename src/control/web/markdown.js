/**
 * A small Markdown renderer for model output. Everything is HTML-escaped first; only a few
 * transforms then add markup: fenced and inline code, headings, lists, bold, italic, and links
 * whose target is http(s). Nothing the model writes can become an element or attribute.
 */

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const SAFE_URL = /^https?:\/\/[^\s<>"']+$/i;
// Placeholders are private-use characters, stripped from the input, so they cannot be forged.
const HOLE_START = "\uE000";
const HOLE_END = "\uE001";
const HOLES = /\uE000(\d+)\uE001/g;

/** Escapes text for use in HTML content and attribute values. */
export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
}

/** Renders Markdown `source` to an HTML string that is safe to assign to innerHTML. */
export function renderMarkdown(source) {
  const text = String(source ?? "")
    .replace(/[\uE000\uE001]/g, "")
    .replace(/\r\n?/g, "\n");
  const parts = text.split(/^```[ \t]*([\w+#.-]*)[ \t]*\n([\s\S]*?)(?:^```[ \t]*$|(?![\s\S]))/m);
  let html = "";
  for (let i = 0; i < parts.length; i += 3) {
    html += renderBlocks(parts[i]);
    if (i + 2 < parts.length) html += renderFence(parts[i + 1], parts[i + 2]);
  }
  return html;
}

function renderFence(lang, code) {
  const body = escapeHtml(code.replace(/\n$/, ""));
  const cls = lang ? ` class="language-${escapeHtml(lang)}"` : "";
  return `<pre><code${cls}>${body}</code></pre>`;
}

function renderBlocks(text) {
  let html = "";
  for (const block of text.split(/\n[ \t]*\n/)) {
    const lines = block.split("\n").filter((line) => line.trim() !== "");
    if (lines.length === 0) continue;
    html += renderBlock(lines);
  }
  return html;
}

function renderBlock(lines) {
  const heading = /^(#{1,6})\s+(.*)$/.exec(lines[0]);
  if (heading && lines.length === 1) {
    const level = Math.min(heading[1].length + 2, 6);
    return `<h${level}>${renderInline(heading[2])}</h${level}>`;
  }
  if (lines.every((line) => /^\s*[-*+]\s+/.test(line))) {
    return renderList("ul", lines, /^\s*[-*+]\s+/);
  }
  if (lines.every((line) => /^\s*\d+[.)]\s+/.test(line))) {
    return renderList("ol", lines, /^\s*\d+[.)]\s+/);
  }
  if (lines.every((line) => /^>\s?/.test(line))) {
    const inner = lines.map((line) => line.replace(/^>\s?/, ""));
    return `<blockquote>${renderBlock(inner)}</blockquote>`;
  }
  return `<p>${lines.map(renderInline).join("<br>")}</p>`;
}

function renderList(tag, lines, marker) {
  const items = lines.map((line) => `<li>${renderInline(line.replace(marker, ""))}</li>`);
  return `<${tag}>${items.join("")}</${tag}>`;
}

/** Inline transforms on escaped text; code spans and links are set aside first. */
function renderInline(raw) {
  const holes = [];
  const hole = (html) => `${HOLE_START}${holes.push(html) - 1}${HOLE_END}`;
  let text = raw.replace(/`([^`\n]+)`/g, (_, code) => hole(`<code>${escapeHtml(code)}</code>`));
  text = text.replace(/\[([^\]\n]+)\]\(([^)\s]+)\)/g, (whole, label, url) =>
    SAFE_URL.test(url) ? hole(link(url, emphasis(escapeHtml(label)))) : whole,
  );
  text = text.replace(/https?:\/\/[^\s<>"'`]+[^\s<>"'`.,;:!?)\]]/gi, (url) =>
    hole(link(url, escapeHtml(url))),
  );
  text = emphasis(escapeHtml(text));
  return text.replace(HOLES, (_, index) => holes[Number(index)]);
}

function emphasis(escaped) {
  return escaped
    .replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/__(?=\S)([^_]*?\S)__/g, "<strong>$1</strong>")
    .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?![*\w])/g, "$1<em>$2</em>")
    .replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?![_\w])/g, "$1<em>$2</em>");
}

function link(url, labelHtml) {
  return `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer nofollow">${labelHtml}</a>`;
}
