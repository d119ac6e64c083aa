/**
 * A command as a person can check it on an approval card: every character that would otherwise
 * hide something made visible (a newline shows `⏎` and still breaks the line, a tab `␉`, a long
 * run of spaces `⟨640 spaces⟩`, control characters their Control Pictures, zero-width and
 * bidirectional marks `⟨U+202E⟩`), and, where a chat message is too short for all of it, its
 * head and its tail with where to read it whole. Never cut before its last visible character.
 */

/** Longer runs of spaces are shown as a count: enough to push text off a phone's screen. */
const MAX_PLAIN_SPACES = 8;

/**
 * Characters that show as nothing or move other text: format characters (zero-width, bidi
 * controls, the BOM, tags), separators other than the plain space, and blank letters.
 */
const INVISIBLE =
  /[\p{Cf}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\u115f\u1160\u3164\uffa0\u2800\u180e]/u;
/** Variation selectors and the grapheme joiner: they attach to the character before, unseen. */
const isSelector = (code: number) =>
  code === 0x034f || (code >= 0xfe00 && code <= 0xfe0f) || (code >= 0xe0100 && code <= 0xe01ef);

/** `text` with whatever would hide something made visible; one output line per input line. */
export function makeVisible(text: string): string {
  let out = "";
  let spaces = 0;
  const flushSpaces = () => {
    out += spaces > MAX_PLAIN_SPACES ? `⟨${spaces} spaces⟩` : " ".repeat(spaces);
    spaces = 0;
  };
  for (const char of text) {
    if (char === " ") {
      spaces++;
      continue;
    }
    flushSpaces();
    out += visibleChar(char);
  }
  flushSpaces();
  return out;
}

function visibleChar(char: string): string {
  const code = char.codePointAt(0)!;
  if (char === "\n") return "⏎\n";
  if (char === "\t") return "␉";
  // C0 controls have Control Pictures at U+2400 + code (␍ for CR, ␛ for ESC); DEL is ␡.
  if (code < 0x20) return String.fromCodePoint(0x2400 + code);
  if (code === 0x7f) return "␡";
  if ((code >= 0x80 && code <= 0x9f) || INVISIBLE.test(char) || isSelector(code)) {
    return `⟨U+${code.toString(16).toUpperCase().padStart(4, "0")}⟩`;
  }
  return char;
}

/**
 * The visible command cut to `budget` characters when longer: its head and its tail around a
 * line that says how much is left out and where it is shown whole (to an operator, in the
 * dashboard: a chat card names no operator tool). Cuts never split a character.
 */
export function fitVisible(visible: string, budget: number, approvalId: string): string {
  // Measured in UTF-16 code units, as Telegram and Discord count.
  if (visible.length <= budget) return visible;
  const note = (left: number) =>
    `\n⟨… ${left} characters not shown here: an operator sees the whole command [${approvalId}] in Keel's dashboard …⟩\n`;
  const chars = Array.from(visible);
  const room = Math.max(budget - note(visible.length).length, 40);
  const head = takeUnits(chars, Math.ceil(room / 2));
  const tail = takeUnits([...chars].reverse(), room - Math.ceil(room / 2)).reverse();
  const left = chars.length - head.length - tail.length;
  return `${head.join("")}${note(left)}${tail.join("")}`;
}

/** The first characters of `chars` that fit in `units` UTF-16 code units. */
function takeUnits(chars: string[], units: number): string[] {
  const taken: string[] = [];
  let used = 0;
  for (const char of chars) {
    if (used + char.length > units) break;
    taken.push(char);
    used += char.length;
  }
  return taken;
}
