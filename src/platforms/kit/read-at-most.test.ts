import { describe, expect, it } from "vitest";
import { readAtMost } from "./read-at-most.js";

function body(chunks: string[]): { stream: ReadableStream<Uint8Array>; pulled: () => number } {
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks[pulled];
      if (next === undefined) return controller.close();
      pulled += 1;
      controller.enqueue(new TextEncoder().encode(next));
    },
  });
  return { stream, pulled: () => pulled };
}

describe("readAtMost", () => {
  it("reads a body up to and including the limit", async () => {
    const { bytes, tooLarge } = await readAtMost(body(["abc", "def"]).stream, 6);
    expect(tooLarge).toBe(false);
    expect(bytes.toString()).toBe("abcdef");
  });

  it("stops at the first chunk past the limit and reads no further", async () => {
    const { stream, pulled } = body(["abc", "def", "ghi", "jkl"]);
    const { bytes, tooLarge } = await readAtMost(stream, 5);
    expect(tooLarge).toBe(true);
    expect(bytes.length).toBe(0);
    expect(pulled()).toBeLessThan(4);
  });
});
