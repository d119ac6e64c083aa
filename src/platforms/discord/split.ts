/**
 * Splitting long replies into Discord messages. Discord renders Markdown itself, so the text
 * goes out as written; it only has to fit 2000 characters per message
 * (https://discord.com/developers/docs/resources/message#create-message), and a fenced code block
 * cut in two must stay a code block on both sides (closed at the end of one part, reopened with
 * the same language at the start of the next). Pure.
 */

/** Discord's content limit. Measured in UTF-16 code units, which never undercounts characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

const FENCE = /^\s*(`{3,}|~{3,})(.*)$/;

/** The fence marker that closes a block opened by `marker` (same character, at least as long). */
function closes(line: string, marker: string): boolean {
  const match = FENCE.exec(line);
  return (
    match !== null &&
    match[1]![0] === marker[0] &&
    match[1]!.length >= marker.length &&
    match[2]!.trim() === ""
  );
}

/** Cuts `text` into pieces of at most `max` units: at the last space if there is one, never inside a surrogate pair. */
function hardWrap(text: string, max: number): string[] {
  const pieces: string[] = [];
  let rest = text;
  while (rest.length > max) {
    let cut = rest.lastIndexOf(" ", max);
    if (cut < max / 2) cut = max;
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut).replace(/^ /, "");
  }
  pieces.push(rest);
  return pieces;
}

/**
 * Splits `text` into parts of at most `limit` characters, at line ends where possible. Inside a
 * fenced code block each part closes the fence and the next reopens it (with its info string),
 * so every part renders on its own. Empty text gives no parts.
 */
export function splitDiscordMessage(text: string, limit = DISCORD_MESSAGE_LIMIT): string[] {
  if (text.trim() === "") return [];
  if (text.length <= limit) return [text];
  const parts: string[] = [];
  let current = "";
  /** The open fence's opening line (e.g. "```ts"), or null outside a code block. */
  let openFence: string | null = null;
  let marker = "";

  const closing = () => (openFence === null ? "" : `\n${marker}`);
  const flush = () => {
    if (current.trim() !== "" && current !== openFence) parts.push(current + closing());
    current = openFence ?? "";
  };
  const append = (line: string) => {
    current = current === "" ? line : `${current}\n${line}`;
  };

  for (const line of text.split("\n")) {
    // Room a line may take in a part that also carries the reopened fence and its closing.
    const reserve = openFence === null ? 0 : openFence.length + 1 + marker.length + 1;
    const room = limit - reserve;
    if (openFence !== null && closes(line, marker)) {
      // The closing fence: when it does not fit, the flush closes the block for it.
      const fits = current.length + 1 + line.length <= limit;
      if (fits) append(line);
      else flush();
      if (!fits) current = "";
      openFence = null;
      marker = "";
      continue;
    }
    const pieces = line.length > room ? hardWrap(line, Math.max(room, 1)) : [line];
    for (const piece of pieces) {
      const joined = current === "" ? piece.length : current.length + 1 + piece.length;
      if (joined + closing().length > limit) flush();
      append(piece);
    }
    const match = openFence === null ? FENCE.exec(line) : null;
    if (match) {
      openFence = line.trim();
      marker = match[1]!;
    }
  }
  if (current.trim() !== "" && current !== openFence) parts.push(current + closing());
  return parts;
}
