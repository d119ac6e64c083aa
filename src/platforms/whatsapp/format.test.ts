import { describe, expect, it } from "vitest";
import { splitWhatsappText, toWhatsappText } from "./format.js";

describe("splitWhatsappText", () => {
  it("keeps a short text whole, and an empty one as one empty piece", () => {
    expect(splitWhatsappText("hello")).toEqual(["hello"]);
    expect(splitWhatsappText("")).toEqual([""]);
  });

  it("cuts at the last line break, else the last space, in the second half of a piece", () => {
    expect(splitWhatsappText("aaaa bbbb\ncc dd", 12)).toEqual(["aaaa bbbb", "cc dd"]);
    expect(splitWhatsappText("aaaa bbbb cc dd", 12)).toEqual(["aaaa bbbb", "cc dd"]);
    expect(splitWhatsappText("aaaa bbbb\ncccccc", 14)).toEqual(["aaaa bbbb", "cccccc"]);
  });

  it("cuts inside a word only when there is no break, and counts code points as WhatsApp does", () => {
    expect(splitWhatsappText("x".repeat(10), 4)).toEqual(["xxxx", "xxxx", "xx"]);
    const emoji = "🙂".repeat(5);
    const pieces = splitWhatsappText(emoji, 2);
    expect(pieces).toEqual(["🙂🙂", "🙂🙂", "🙂"]);
    expect(pieces.join("")).toBe(emoji);
  });
});

describe("toWhatsappText", () => {
  it("turns Markdown bold into WhatsApp's and leaves the rest", () => {
    expect(toWhatsappText("a **bold** word, `code`, _it_")).toBe("a *bold* word, `code`, _it_");
    expect(toWhatsappText("2 ** 3 ** 4")).toBe("2 ** 3 ** 4");
  });
});
