import { describe, expect, it } from "vitest";
import { checkTelegramHtml } from "../../../test/fakes/telegram-html.js";
import {
  escapeHtml,
  htmlToPlainText,
  markdownToTelegramHtml,
  splitMessage,
  splitPlainText,
} from "./format.js";

function expectValid(html: string): string {
  const check = checkTelegramHtml(html);
  if (!check.ok) throw new Error(`${check.error}\n--- in ---\n${html}`);
  return check.text;
}

/** A small deterministic PRNG so the fuzz cases are reproducible. */
function prng(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((w) => w !== "");
}

describe("markdownToTelegramHtml", () => {
  it("formats bold, italic, strike, inline code, links and headings", () => {
    const html = markdownToTelegramHtml(
      "# Plan\n**bold** *it* _also_ ~~gone~~ `x<y` [docs](https://example.com/a?b=1&c=2)",
    );
    expect(html).toBe(
      '<b>Plan</b>\n<b>bold</b> <i>it</i> <i>also</i> <s>gone</s> <code>x&lt;y</code> <a href="https://example.com/a?b=1&amp;c=2">docs</a>',
    );
  });

  it("turns fenced code blocks into pre/code with the language", () => {
    const html = markdownToTelegramHtml(
      "Look:\n```python\nif a < b and c > d:\n    print('&')\n```\ndone",
    );
    expect(html).toBe(
      "Look:\n<pre><code class=\"language-python\">if a &lt; b and c &gt; d:\n    print('&amp;')</code></pre>\ndone",
    );
    expect(markdownToTelegramHtml("```\nplain **not bold**\n```")).toBe(
      "<pre>plain **not bold**</pre>",
    );
  });

  it("closes an unterminated code block at the end of the text", () => {
    expect(expectValid(markdownToTelegramHtml("```js\nlet x = 1;"))).toBe("let x = 1;");
  });

  it("escapes model output so it cannot inject markup", () => {
    const html = markdownToTelegramHtml(
      '<b>hi</b> <a href="javascript:x">y</a> & &amp; <tg-spoiler>',
    );
    expect(html).toBe(
      "&lt;b&gt;hi&lt;/b&gt; &lt;a href=&quot;javascript:x&quot;&gt;y&lt;/a&gt; &amp; &amp;amp; &lt;tg-spoiler&gt;",
    );
    expect(expectValid(html)).toBe('<b>hi</b> <a href="javascript:x">y</a> & &amp; <tg-spoiler>');
  });

  it("keeps links with unsafe schemes as text", () => {
    expect(markdownToTelegramHtml("[click](javascript:alert(1))")).toBe(
      "[click](javascript:alert(1))",
    );
  });

  it("keeps lists, identifiers and arithmetic as text", () => {
    const md = "- first item\n* second item\n1. third\nsnake_case_name and 2*3*4";
    expect(markdownToTelegramHtml(md)).toBe(md);
  });

  it("never produces crossing tags from overlapping emphasis", () => {
    for (const md of [
      "**a *b** c*",
      "*a **b* c**",
      "__a _b__ c_",
      "~~a **b~~ c**",
      "`a **b` c**",
    ]) {
      expectValid(markdownToTelegramHtml(md));
    }
  });

  it("produces valid Telegram HTML for random markdown-ish input", () => {
    const random = prng(42);
    const alphabet = [
      "*",
      "**",
      "_",
      "__",
      "`",
      "```",
      "~~",
      "[",
      "]",
      "(",
      ")",
      "<",
      ">",
      "&",
      "#",
      "\n",
      " ",
      "a",
      "word",
      "https://x.io",
      "é",
      "😀",
    ];
    for (let n = 0; n < 500; n++) {
      let md = "";
      const length = Math.floor(random() * 40);
      for (let k = 0; k < length; k++) md += alphabet[Math.floor(random() * alphabet.length)];
      expectValid(markdownToTelegramHtml(md));
    }
  });
});

describe("splitMessage", () => {
  it("returns short messages unchanged and nothing for blank ones", () => {
    expect(splitMessage("<b>hi</b>")).toEqual(["<b>hi</b>"]);
    expect(splitMessage("  \n ")).toEqual([]);
  });

  it("splits a 10,000-character reply with a long code block into valid pieces", () => {
    const prose = Array.from(
      { length: 40 },
      (_, k) => `Paragraph ${k} says **something** useful about item_${k}.`,
    ).join("\n\n");
    const code = Array.from(
      { length: 150 },
      (_, k) => `  const value${k} = compute(${k}) < limit && ok; // step ${k}`,
    ).join("\n");
    const markdown = `# Report\n\n${prose}\n\n\`\`\`ts\n${code}\n\`\`\`\n\nThat is *all* for [now](https://example.com).`;
    expect(markdown.length).toBeGreaterThan(10_000);
    const pieces = splitMessage(markdownToTelegramHtml(markdown));
    expect(pieces.length).toBeGreaterThan(2);
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(4096);
      expectValid(piece);
    }
    const visible = pieces.map((p) => expectValid(p)).join("\n");
    expect(words(visible)).toEqual(words(htmlToPlainText(markdownToTelegramHtml(markdown))));
    const continued = pieces.filter((p) => p.startsWith('<pre><code class="language-ts">'));
    expect(continued.length).toBeGreaterThan(0);
  });

  it("closes and re-opens a pre block split across pieces", () => {
    const code = Array.from({ length: 30 }, (_, k) => `line ${k}`).join("\n");
    const pieces = splitMessage(`<pre><code class="language-sh">${code}</code></pre>`, 120);
    expect(pieces.length).toBeGreaterThan(1);
    for (const piece of pieces) {
      expect(piece.startsWith('<pre><code class="language-sh">')).toBe(true);
      expect(piece.endsWith("</code></pre>")).toBe(true);
      expect(piece.length).toBeLessThanOrEqual(120);
    }
    expect(pieces.map((p) => htmlToPlainText(p)).join("\n")).toBe(code);
  });

  it("prefers paragraph, then line, then word boundaries and never breaks a word", () => {
    const a = "alpha beta gamma delta epsilon ".repeat(3).trim();
    const b = "zeta eta theta";
    const tail = "iota kappa lambda ".repeat(10).trim();
    // A paragraph break and a later line break both fit past half the limit: the paragraph wins.
    expect(splitMessage(`${a}\n\n${b}\n${tail}`, 150)[0]).toBe(a);
    // A line break and a later space both fit: the line wins.
    expect(splitMessage(`${a}\n${b} ${tail}`, 150)[0]).toBe(a);
    const text = Array.from({ length: 300 }, (_, k) => `word${k}`).join(" ");
    const wordPieces = splitMessage(text, 100);
    for (const piece of wordPieces) {
      expect(piece.length).toBeLessThanOrEqual(100);
      for (const word of words(piece)) expect(word).toMatch(/^word\d+$/);
    }
    expect(wordPieces.join(" ")).toBe(text);
  });

  it("cuts inside a word only when there is no boundary, never inside an entity or surrogate pair", () => {
    const html = `<b>${"&amp;😀x".repeat(400)}</b>`;
    const pieces = splitMessage(html, 101);
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(101);
      expectValid(piece);
      expect(piece).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    }
    expect(pieces.map((p) => htmlToPlainText(p)).join("")).toBe("&😀x".repeat(400));
  });

  it("keeps nested tags valid across cuts", () => {
    const inner = "nested words here ".repeat(30);
    const html = `<i>start <b>${inner}<a href="https://e.x/?q=&quot;">${inner}</a></b> end</i>`;
    for (const piece of splitMessage(html, 150)) {
      expect(piece.length).toBeLessThanOrEqual(150);
      expectValid(piece);
    }
  });
});

describe("splitPlainText", () => {
  it("splits on boundaries and keeps every character", () => {
    const text = Array.from({ length: 500 }, (_, k) => `w${k}`).join(" ");
    const pieces = splitPlainText(text, 64);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(64);
    expect(pieces.join(" ")).toBe(text);
  });

  it("does not split a surrogate pair on a hard cut", () => {
    const pieces = splitPlainText("😀".repeat(100), 51);
    for (const piece of pieces) expect(piece).not.toMatch(/[\uD800-\uDBFF]$/);
    expect(pieces.join("")).toBe("😀".repeat(100));
  });
});

describe("escapeHtml", () => {
  it("escapes the characters Telegram requires", () => {
    expect(escapeHtml(`<a href="x">&</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;");
  });
});
