import { describe, expect, it } from "vitest";
import { markdownToMrkdwn, SLACK_MESSAGE_LIMIT, slackTextToPlain, splitMrkdwn } from "./format.js";

describe("markdownToMrkdwn", () => {
  it("converts emphasis, strike, headings, bullets and links", () => {
    expect(markdownToMrkdwn("**bold** and *it* and ~~gone~~")).toBe("*bold* and _it_ and ~gone~");
    expect(markdownToMrkdwn("# Title\n- one\n* two")).toBe("*Title*\n• one\n• two");
    expect(markdownToMrkdwn("see [the docs](https://x.test/a?b=1&c=2)")).toBe(
      "see <https://x.test/a?b=1&amp;c=2|the docs>",
    );
  });

  it("escapes Slack's control characters everywhere, and leaves code content alone", () => {
    expect(markdownToMrkdwn("a < b && c > d")).toBe("a &lt; b &amp;&amp; c &gt; d");
    expect(markdownToMrkdwn("run `x **y** <z>` now")).toBe("run `x **y** &lt;z&gt;` now");
    expect(markdownToMrkdwn("```ts\nconst a = **b** < 1;\n```\nafter **x**")).toBe(
      "```\nconst a = **b** &lt; 1;\n```\nafter *x*",
    );
  });
});

describe("splitMrkdwn", () => {
  it("keeps a message within the limit as one piece", () => {
    expect(splitMrkdwn("hello")).toEqual(["hello"]);
    expect(splitMrkdwn("x".repeat(SLACK_MESSAGE_LIMIT))).toHaveLength(1);
  });

  it("splits at line breaks below 40,000 characters and loses nothing", () => {
    const line = `${"word ".repeat(19)}end\n`;
    const text = line.repeat(1000);
    const pieces = splitMrkdwn(text);
    expect(pieces.length).toBe(3);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(SLACK_MESSAGE_LIMIT);
    expect(pieces.join("")).toBe(text);
    expect(pieces[0]!.endsWith("end\n")).toBe(true);
  });

  it("closes a code block at a cut and opens it again in the next piece", () => {
    const text = `intro\n\`\`\`\n${"code line\n".repeat(30)}\`\`\`\ndone`;
    const pieces = splitMrkdwn(text, 120);
    expect(pieces.length).toBeGreaterThan(2);
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(120);
      expect((piece.match(/```/g) ?? []).length % 2).toBe(0);
    }
    const code = pieces.join("").split("code line").length - 1;
    expect(code).toBe(30);
  });

  it("never cuts inside an entity", () => {
    const text = "&amp;".repeat(50);
    for (const piece of splitMrkdwn(text, 33)) expect(piece).toMatch(/^(&amp;)+$/);
  });
});

describe("slackTextToPlain", () => {
  it("drops the bot's own mention and makes other tokens readable", () => {
    expect(slackTextToPlain("<@UBOT> hi <@U2|ann> in <#C1|general>", "UBOT")).toBe(
      "hi @ann in #general",
    );
    expect(slackTextToPlain("see <https://a.test|site> and <https://b.test>", "UBOT")).toBe(
      "see site (https://a.test) and https://b.test",
    );
    expect(slackTextToPlain("a &lt;b&gt; &amp; c <!here>", "UBOT")).toBe("a <b> & c @here");
    expect(slackTextToPlain("ping <!subteam^S1|@ops>", "UBOT")).toBe("ping @ops");
  });

  it("turns a leading !command into the /command Keel knows", () => {
    expect(slackTextToPlain("<@UBOT> !stop", "UBOT")).toBe("/stop");
    expect(slackTextToPlain("!new", "UBOT")).toBe("/new");
    expect(slackTextToPlain("!!! wow", "UBOT")).toBe("!!! wow");
    expect(slackTextToPlain("say !stop", "UBOT")).toBe("say !stop");
  });
});
