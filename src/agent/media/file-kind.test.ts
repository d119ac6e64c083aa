import { describe, expect, it } from "vitest";
import { safeFileName } from "./file-kind.js";

describe("safeFileName", () => {
  it("keeps a 300-byte non-ASCII name within the byte budget, extension kept", () => {
    const name = `${"名".repeat(100)}.csv`; // 304 bytes, 104 characters
    const safe = safeFileName(name, 240);
    expect(Buffer.byteLength(safe)).toBeLessThanOrEqual(240);
    expect(safe).toMatch(/^名+\.csv$/);
  });

  it("leaves a short name as it is, and cleans separators and leading dots", () => {
    expect(safeFileName("notes.txt")).toBe("notes.txt");
    expect(safeFileName("../.ssh/id")).toBe("_.ssh_id");
    expect(safeFileName("...")).toBe("file");
  });
});
