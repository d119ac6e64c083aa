import { describe, expect, it } from "vitest";
import { cutFileName, cutUtf8 } from "./utf8.js";

describe("cutUtf8", () => {
  it("cuts at a character boundary, never inside one", () => {
    expect(cutUtf8("abc", 10)).toBe("abc");
    expect(cutUtf8("名名名", 7)).toBe("名名"); // 3 bytes each
    expect(cutUtf8("a😀b", 4)).toBe("a"); // the emoji is 4 bytes (two UTF-16 units)
    expect(cutUtf8("a😀b", 5)).toBe("a😀");
    const cut = cutUtf8("é".repeat(200), 255);
    expect(Buffer.byteLength(cut)).toBe(254);
    expect(Buffer.from(cut).toString("utf8")).toBe(cut);
  });
});

describe("cutFileName", () => {
  it("cuts a name to 255 bytes, keeping its extension", () => {
    const name = `${"報告".repeat(50)}.csv`; // 304 bytes
    const cut = cutFileName(name);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(255);
    expect(cut).toMatch(/^(報告)+報?\.csv$/);
    expect(cutFileName("short.txt")).toBe("short.txt");
  });
});
