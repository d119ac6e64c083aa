/**
 * A text in pieces of at most `limit` characters (code points), for platforms with a message
 * limit and no formatting to keep whole: cut at the last line break, else the last space, in the
 * second half of a piece; inside a word only when there is neither.
 */
export function splitText(text: string, limit: number): string[] {
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
