/**
 * Text to and from Slack. Pure functions.
 *
 * Outbound: the model writes Markdown, Slack renders its own "mrkdwn" (`*bold*`, `_italic_`,
 * `~strike~`, `<url|label>`, and `&`, `<`, `>` escaped as entities), and truncates `text` beyond
 * 40,000 characters (https://api.slack.com/changelog/2018-04-truncating-really-long-messages).
 * Inbound: Slack encodes mentions, channels and links as `<...>` tokens and escapes `&<>`.
 */

/** Slack truncates a message's `text` beyond this many characters. */
export const SLACK_MESSAGE_LIMIT = 40_000;

const FENCE = "```";

/** Escapes the three characters Slack treats as control characters in message text. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

const BOLD_MARK = "\uE000";

/** Converts the inline Markdown of one prose segment (no code) to mrkdwn. */
function convertProse(text: string): string {
  const lines = escapeMrkdwn(text)
    .split("\n")
    .map((line) => {
      const heading = /^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
      if (heading) return `${BOLD_MARK}${heading[1]}${BOLD_MARK}`;
      // `* item` would read as italics to Slack: bullets become "•".
      return line.replace(/^(\s*)[-*+]\s+/, "$1• ");
    });
  return (
    lines
      .join("\n")
      // Links first, so their labels are converted like any text but their URLs are not.
      .replace(/!?\[([^\]\n]+)\]\(([^)\s]+)\)/g, (_whole, label: string, url: string) =>
        /^(?:https?:|mailto:)/i.test(url) ? `<${url}|${label}>` : `${label} (${url})`,
      )
      .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, `${BOLD_MARK}$1${BOLD_MARK}`)
      .replace(
        /(?<![\p{L}\p{N}_])__(?=\S)(.+?)(?<=\S)__(?![\p{L}\p{N}_])/gu,
        `${BOLD_MARK}$1${BOLD_MARK}`,
      )
      .replace(/(?<![\p{L}\p{N}*\\])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\p{L}\p{N}*])/gu, "_$1_")
      .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, "~$1~")
      .replaceAll(BOLD_MARK, "*")
  );
}

/**
 * Model Markdown to Slack mrkdwn: emphasis, headings (bold lines), bullets, links; code spans and
 * fenced blocks keep their content (escaped only), and a fence's language tag is dropped, since
 * Slack would show it as the first line of code.
 */
export function markdownToMrkdwn(markdown: string): string {
  const out: string[] = [];
  const fence = /^[ \t]*```[^\n`]*\n([\s\S]*?)^[ \t]*```[ \t]*$/gm;
  let last = 0;
  for (const match of markdown.matchAll(fence)) {
    out.push(convertInline(markdown.slice(last, match.index)));
    out.push(`${FENCE}\n${escapeMrkdwn(match[1]!.replace(/\n$/, ""))}\n${FENCE}`);
    last = match.index + match[0].length;
  }
  out.push(convertInline(markdown.slice(last)));
  return out.join("");
}

/** Prose with inline code spans: spans are escaped only, the rest converted. */
function convertInline(text: string): string {
  const parts = text.split(/(`[^`\n]+`)/);
  return parts
    .map((part, index) => (index % 2 === 1 ? escapeMrkdwn(part) : convertProse(part)))
    .join("");
}

/** Where to cut `text` at or before `limit`: a line break, else a space, never inside an entity. */
function cutPoint(text: string, limit: number): number {
  const newline = text.lastIndexOf("\n", limit);
  if (newline >= limit / 2) return newline + 1;
  const space = text.lastIndexOf(" ", limit);
  if (space >= limit / 2) return space + 1;
  // A hard cut must not split `&amp;` and its kin.
  const amp = text.lastIndexOf("&", limit - 1);
  if (amp > limit - 6 && text.indexOf(";", amp) >= limit) return amp;
  return limit;
}

/** True when `text` ends inside a fenced code block (an odd number of fences). */
function endsInsideFence(text: string): boolean {
  return (text.match(/```/g)?.length ?? 0) % 2 === 1;
}

/**
 * Splits mrkdwn into messages of at most `limit` characters, preferring line breaks. A piece that
 * ends inside a code block closes it, and the next piece opens it again, so every piece renders
 * on its own.
 */
export function splitMrkdwn(text: string, limit = SLACK_MESSAGE_LIMIT): string[] {
  const reserve = FENCE.length * 2 + 2;
  const pieces: string[] = [];
  let rest = text;
  let reopen = false;
  while (rest.length > 0) {
    const head = reopen ? `${FENCE}\n` : "";
    if (head.length + rest.length <= limit) {
      pieces.push(head + rest);
      break;
    }
    const cut = cutPoint(rest, limit - head.length - reserve);
    let piece = head + rest.slice(0, cut);
    rest = rest.slice(cut);
    reopen = endsInsideFence(piece);
    if (reopen) piece = `${piece.replace(/\n?$/, "\n")}${FENCE}`;
    pieces.push(piece);
  }
  return pieces.length > 0 ? pieces : [""];
}

const ENTITIES: Record<string, string> = { "&lt;": "<", "&gt;": ">", "&amp;": "&" };

/**
 * Slack message text to plain text for the model: our own mention is removed, other mentions,
 * channels and links become readable, entities are decoded. A leading `!name` becomes `/name`:
 * Slack clients take a typed `/name` as their own slash command, so `!new`, `!stop`, `!restart`
 * are how Keel's chat commands are written on Slack.
 */
export function slackTextToPlain(text: string, botUserId: string): string {
  const plain = text
    .replace(/<([@#!])([^>|]+)(?:\|([^>]*))?>/g, (_whole, sigil: string, id: string, label) => {
      if (sigil === "@" && id === botUserId) return "";
      if (sigil === "!") return `@${(label ?? id.replace(/^subteam\^/, "")).replace(/^@/, "")}`;
      return `${sigil}${label || id}`;
    })
    .replace(/<([^>|]+)\|([^>]*)>/g, (_whole, url: string, label: string) =>
      label && label !== url ? `${label} (${url})` : url,
    )
    .replace(/<([^>]+)>/g, "$1")
    .replace(/&(?:lt|gt|amp);/g, (entity) => ENTITIES[entity] ?? entity)
    .replace(/[ \t]{2,}/g, " ")
    .trim();
  return plain.replace(/^!([A-Za-z][A-Za-z0-9_]*)(?=\s|$)/, "/$1");
}

/** True when Slack text mentions the user `userId` (`<@U123>` or `<@U123|name>`). */
export function mentions(text: string, userId: string): boolean {
  return text.includes(`<@${userId}>`) || text.includes(`<@${userId}|`);
}
