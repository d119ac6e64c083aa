import { describe, expect, it } from "vitest";
import { DISCORD_MESSAGE_LIMIT, splitDiscordMessage } from "./split.js";

/** True when every fence opened in `part` is closed in it. */
function fencesBalanced(part: string): boolean {
  return (part.match(/^```/gm) ?? []).length % 2 === 0;
}

describe("splitDiscordMessage", () => {
  it("keeps a short message whole and drops an empty one", () => {
    expect(splitDiscordMessage("hello")).toEqual(["hello"]);
    expect(splitDiscordMessage("  \n ")).toEqual([]);
  });

  it("splits at line ends into parts of at most 2000 characters, losing no line", () => {
    const lines = Array.from({ length: 120 }, (_, i) => `line ${i} ${"x".repeat(40)}`);
    const parts = splitDiscordMessage(lines.join("\n"));
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(DISCORD_MESSAGE_LIMIT);
    expect(parts.join("\n")).toBe(lines.join("\n"));
  });

  it("closes a code block at the cut and reopens it with its language in the next part", () => {
    const code = Array.from({ length: 100 }, (_, i) => `const v${i} = ${i}; // ${"y".repeat(20)}`);
    const text = ["Here it is:", "```ts", ...code, "```", "Done."].join("\n");
    const parts = splitDiscordMessage(text);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) {
      expect(part.length).toBeLessThanOrEqual(DISCORD_MESSAGE_LIMIT);
      expect(fencesBalanced(part), part.slice(0, 80)).toBe(true);
    }
    expect(parts[1]!.startsWith("```ts\n")).toBe(true);
    expect(parts.at(-1)!.endsWith("Done.")).toBe(true);
    // Every code line arrives exactly once.
    const all = parts.join("\n");
    for (const line of code) expect(all.split(line).length - 1).toBe(1);
  });

  it("cuts a line longer than the limit, at a space when there is one", () => {
    const words = Array.from({ length: 600 }, (_, i) => `w${i}`).join(" ");
    const parts = splitDiscordMessage(words);
    for (const part of parts) expect(part.length).toBeLessThanOrEqual(DISCORD_MESSAGE_LIMIT);
    expect(parts.join(" ")).toBe(words);
    const solid = "z".repeat(4500);
    expect(splitDiscordMessage(solid).map((p) => p.length)).toEqual([2000, 2000, 500]);
  });

  it("never cuts a surrogate pair in two", () => {
    const text = "😀".repeat(1500);
    const parts = splitDiscordMessage(text);
    expect(parts.join("")).toBe(text);
    // A lone surrogate would show as a broken character on both sides of the cut.
    for (const part of parts) expect(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(part)).toBe(false);
  });
});
