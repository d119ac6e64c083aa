/** One user's memory file: entries, the 4 KB limit, ambiguous edits, names that cannot escape memory/. */
import { readFileSync, statSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { isMemoryUser, MEMORY_MAX_BYTES, MemoryError, MemoryFile } from "./memory-file.js";

describe("MemoryFile", () => {
  let dir: ReturnType<typeof createTempDir>;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  it("adds, replaces and removes entries in <home>/memory/<platform>-<id>.md (mode 0600)", () => {
    const file = new MemoryFile(dir.path, "telegram-42");
    expect(file.add("likes tea")).toMatch(/^Saved/);
    expect(file.add("lives in Lyon")).toMatch(/^Saved/);
    expect(file.add("likes tea")).toBe("Already in memory.");
    file.replace("Lyon", "lives in Nantes");
    expect(readFileSync(`${dir.path}/memory/telegram-42.md`, "utf8")).toBe(
      "likes tea\n\nlives in Nantes\n",
    );
    file.remove("tea");
    expect(file.entries()).toEqual(["lives in Nantes"]);
    expect(statSync(file.path).mode & 0o777).toBe(0o600);
  });

  it("refuses a change past 4 KB and keeps the file as it was", () => {
    const file = new MemoryFile(dir.path, "slack-U1");
    file.add("a".repeat(3_000));
    expect(() => file.add("b".repeat(2_000))).toThrow(MemoryError);
    expect(() => file.add("b".repeat(2_000))).toThrow(/limited to 4096 bytes/);
    expect(file.size()).toBeLessThanOrEqual(MEMORY_MAX_BYTES);
    expect(file.entries()).toEqual(["a".repeat(3_000)]);
  });

  it("an edit must name exactly one entry", () => {
    const file = new MemoryFile(dir.path, "test-1");
    file.add("cat named Tom");
    file.add("dog named Tom");
    expect(() => file.remove("Tom")).toThrow(/2 entries contain "Tom"/);
    expect(() => file.replace("parrot", "x")).toThrow(/No memory entry contains "parrot"/);
    expect(file.entries()).toHaveLength(2);
  });

  it("accepts only <platform>-<id> names, so a name cannot leave the memory folder", () => {
    expect(isMemoryUser("telegram-4242")).toBe(true);
    expect(isMemoryUser("discord-123456789012345678")).toBe(true);
    for (const bad of ["../state", "telegram-../../x", "telegram/42", "noplatform", "-42"]) {
      expect(isMemoryUser(bad), bad).toBe(false);
    }
    expect(() => new MemoryFile(dir.path, "../control_token")).toThrow(MemoryError);
  });
});
