import { describe, expect, it } from "vitest";
import { escapeHtml, renderMarkdown } from "./markdown.js";

describe("renderMarkdown", () => {
  it("shows a script tag as text", () => {
    const html = renderMarkdown("<script>alert(1)</script>");
    expect(html).toBe("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
  });

  it("shows an img with an onerror handler as text", () => {
    const html = renderMarkdown('<img src=x onerror="alert(1)">');
    expect(html).not.toContain("<img");
    expect(html).toContain("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;");
  });

  it("escapes HTML inside code blocks and code spans", () => {
    expect(renderMarkdown("```html\n<b>x</b>\n```")).toBe(
      '<pre><code class="language-html">&lt;b&gt;x&lt;/b&gt;</code></pre>',
    );
    expect(renderMarkdown("run `<rm -rf>` now")).toBe("<p>run <code>&lt;rm -rf&gt;</code> now</p>");
  });

  it("keeps an unclosed code fence as code (a reply still streaming)", () => {
    expect(renderMarkdown("see:\n```\nls -la")).toBe("<p>see:</p><pre><code>ls -la</code></pre>");
  });

  it("links only http and https targets", () => {
    expect(renderMarkdown("[docs](https://example.com/a?b=1&c=2)")).toBe(
      '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer nofollow">docs</a></p>',
    );
    for (const target of [
      "javascript:alert(1)",
      "data:text/html,x",
      "JAVASCRIPT:alert(1)",
      "//evil.example",
    ]) {
      const html = renderMarkdown(`[click](${target})`);
      expect(html).not.toContain("<a");
    }
  });

  it("cannot break out of a link's href attribute", () => {
    const html = renderMarkdown('[x](https://a.example/"onmouseover="alert(1))');
    expect(html).not.toMatch(/<a [^>]*onmouseover/);
    const bare = renderMarkdown('https://a.example/"><script>alert(1)</script>');
    expect(bare).not.toContain("<script");
  });

  it("links bare URLs without trailing punctuation", () => {
    expect(renderMarkdown("see https://example.com/x.")).toBe(
      '<p>see <a href="https://example.com/x" target="_blank" rel="noopener noreferrer nofollow">https://example.com/x</a>.</p>',
    );
  });

  it("renders bold, italic, lists, headings and paragraphs", () => {
    expect(renderMarkdown("**bold** and *it* and _it2_")).toBe(
      "<p><strong>bold</strong> and <em>it</em> and <em>it2</em></p>",
    );
    expect(renderMarkdown("- a\n- b")).toBe("<ul><li>a</li><li>b</li></ul>");
    expect(renderMarkdown("1. a\n2. b")).toBe("<ol><li>a</li><li>b</li></ol>");
    expect(renderMarkdown("# Title")).toBe("<h3>Title</h3>");
    expect(renderMarkdown("one\ntwo\n\nthree")).toBe("<p>one<br>two</p><p>three</p>");
  });

  it("leaves snake_case words and lone asterisks alone", () => {
    expect(renderMarkdown("my_var_name and 2 * 3 * 4")).toBe("<p>my_var_name and 2 * 3 * 4</p>");
  });

  it("ignores forged placeholder characters", () => {
    expect(renderMarkdown("\uE0000\uE001 `x`")).toBe("<p>0 <code>x</code></p>");
  });

  it("escapes quotes for attribute use", () => {
    expect(escapeHtml(`<a href="x" title='y'>&`)).toBe(
      "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;",
    );
  });
});
