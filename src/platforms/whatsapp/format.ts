/** Text for WhatsApp: its one limit (4096 characters a message) and its bold marker. */

export const WHATSAPP_TEXT_LIMIT = 4096;
/** An interactive message's body is shorter (1024); a longer approval question goes as text first. */
export const WHATSAPP_BUTTON_BODY_LIMIT = 1024;

/** Markdown's `**bold**` is WhatsApp's `*bold*`; the rest of the agent's text reads as it is. */
export function toWhatsappText(markdown: string): string {
  return markdown.replace(/\*\*(\S(?:[^*\n]*\S)?)\*\*/g, "*$1*");
}

/**
 * Pieces of at most `limit` characters (code points, as WhatsApp counts), cut at the last line
 * break, else the last space, in the second half of a piece; a cut inside a word only when there
 * is neither.
 */
export function splitWhatsappText(text: string, limit = WHATSAPP_TEXT_LIMIT): string[] {
  const pieces: string[] = [];
  let rest = Array.from(text);
  while (rest.length > limit) {
    const window = rest.slice(0, limit).join("");
    const half = Math.floor(window.length / 2);
    let cut = window.lastIndexOf("\n");
    if (cut < half) cut = window.lastIndexOf(" ");
    const head = cut < half ? rest.slice(0, limit) : Array.from(window.slice(0, cut));
    pieces.push(head.join("").trimEnd());
    rest = rest.slice(head.length);
    while (rest[0] === "\n" || rest[0] === " ") rest.shift();
  }
  const last = rest.join("");
  if (last.length > 0 || pieces.length === 0) pieces.push(last);
  return pieces;
}
