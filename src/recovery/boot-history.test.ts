import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readBootHistory, recordBoot } from "./boot-history.js";

describe("boot history", () => {
  let home: string;

  beforeEach(async () => {
    home = await mkdtemp(join(tmpdir(), "keel-boots-"));
  });

  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it("records boots and prunes those outside the window", async () => {
    await recordBoot(home, 1_000, 60_000);
    await recordBoot(home, 30_000, 60_000);
    expect(await recordBoot(home, 70_000, 60_000)).toEqual([30_000, 70_000]);
    expect(await readBootHistory(home, 80_000, 60_000)).toEqual([30_000, 70_000]);
  });

  it("a missing or corrupt file is an empty history", async () => {
    expect(await readBootHistory(join(home, "missing"), 0, 60_000)).toEqual([]);
    await writeFile(join(home, ".boot_history.json"), "garbage");
    expect(await readBootHistory(home, 0, 60_000)).toEqual([]);
    expect(await recordBoot(home, 5, 60_000)).toEqual([5]);
  });
});
