/** `text` with each character (a code point at a time) replaced by what `replace` makes of it. */
export function escapeEach(text: string, replace: (ch: string, code: number) => string): string {
  let out = "";
  for (const ch of text) out += replace(ch, ch.codePointAt(0) ?? 0);
  return out;
}
