import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createWriteFileTool } from "./write-file.js";

let cwd: string;
const signal = new AbortController().signal;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "keel-write-"));
});

afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

describe("write_file tool", () => {
  it("writes the file, creating parent folders, and is not read-only", async () => {
    const tool = createWriteFileTool();
    expect(tool.readOnly).toBe(false);
    const result = await tool.execute({ path: "a/b/c.txt", content: "héllo" }, { cwd, signal });
    expect(result).toEqual({ output: "Wrote 6 bytes to a/b/c.txt.", isError: false });
    expect(await readFile(join(cwd, "a", "b", "c.txt"), "utf8")).toBe("héllo");
  });

  it("replaces an existing file", async () => {
    await writeFile(join(cwd, "f.txt"), "old content that is longer");
    await createWriteFileTool().execute({ path: "f.txt", content: "new" }, { cwd, signal });
    expect(await readFile(join(cwd, "f.txt"), "utf8")).toBe("new");
  });

  it("reports a file-system failure as an error result", async () => {
    await writeFile(join(cwd, "file"), "");
    const result = await createWriteFileTool().execute(
      { path: "file/inside.txt", content: "x" },
      { cwd, signal },
    );
    expect(result.isError).toBe(true);
    expect(result.output).toMatch(/^Could not write file\/inside\.txt: (ENOTDIR|EEXIST)/);
  });

  it("rejects arguments of the wrong type", async () => {
    const result = await createWriteFileTool().execute({ path: "x", content: 5 }, { cwd, signal });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("content");
  });

  it("refuses to write into a FIFO instead of waiting for a reader", async () => {
    execFileSync("mkfifo", [join(cwd, "pipe")]);
    const result = await createWriteFileTool().execute(
      { path: "pipe", content: "x" },
      { cwd, signal },
    );
    expect(result).toMatchObject({ isError: true });
    expect(result.output).toContain("pipe is a FIFO");
  });
});
