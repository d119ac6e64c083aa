import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createReadFileTool } from "./read-file.js";

let cwd: string;
const signal = new AbortController().signal;

beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), "keel-read-"));
});

afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

describe("read_file tool", () => {
  it("is read-only and describes its arguments as JSON Schema", () => {
    const tool = createReadFileTool();
    expect(tool.readOnly).toBe(true);
    expect(tool.parameters).toMatchObject({
      type: "object",
      properties: { path: { type: "string" } },
      required: ["path"],
    });
    expect(tool.parameters).not.toHaveProperty("$schema");
  });

  it("reads a file relative to the working folder", async () => {
    await mkdir(join(cwd, "notes"));
    await writeFile(join(cwd, "notes", "a.md"), "héllo\nworld\n");
    const result = await createReadFileTool().execute({ path: "notes/a.md" }, { cwd, signal });
    expect(result).toEqual({ output: "héllo\nworld\n", isError: false });
  });

  it("shows only the start of a large file, with a note", async () => {
    await writeFile(join(cwd, "big.txt"), "x".repeat(5000));
    const result = await createReadFileTool({ maxBytes: 100 }).execute(
      { path: "big.txt" },
      { cwd, signal },
    );
    expect(result.isError).toBe(false);
    expect(result.output).toBe(
      `${"x".repeat(100)}\n\n[file truncated: showing the first 100 of 5000 bytes]`,
    );
  });

  it("reports missing files, folders and binary files as errors", async () => {
    const tool = createReadFileTool();
    await mkdir(join(cwd, "dir"));
    await writeFile(join(cwd, "blob.bin"), Buffer.from([1, 2, 0, 3]));
    expect(await tool.execute({ path: "nope.txt" }, { cwd, signal })).toEqual({
      output: "File not found: nope.txt",
      isError: true,
    });
    expect(await tool.execute({ path: "dir" }, { cwd, signal })).toEqual({
      output: "dir is a folder, not a file.",
      isError: true,
    });
    const binary = await tool.execute({ path: "blob.bin" }, { cwd, signal });
    expect(binary.isError).toBe(true);
    expect(binary.output).toContain("binary");
  });

  it("rejects a missing path argument", async () => {
    const result = await createReadFileTool().execute({}, { cwd, signal });
    expect(result.isError).toBe(true);
    expect(result.output).toContain("Invalid arguments for read_file");
  });

  it("refuses a FIFO at once instead of waiting for a writer that never comes", async () => {
    execFileSync("mkfifo", [join(cwd, "pipe")]);
    // Without the check this never settles, and the test times out.
    expect(await createReadFileTool().execute({ path: "pipe" }, { cwd, signal })).toEqual({
      output:
        "pipe is a FIFO (named pipe), not a regular file; the file tools only use regular files.",
      isError: true,
    });
  });

  it("refuses devices and sockets", async () => {
    const tool = createReadFileTool();
    const device = await tool.execute({ path: "/dev/zero" }, { cwd, signal });
    expect(device).toMatchObject({ isError: true });
    expect(device.output).toContain("/dev/zero is a device");
    const server: Server = createServer();
    await new Promise<void>((done) => server.listen(join(cwd, "sock"), done));
    try {
      const socket = await tool.execute({ path: "sock" }, { cwd, signal });
      expect(socket.output).toContain("sock is a socket");
    } finally {
      await new Promise((done) => server.close(done));
    }
  });

  // read_file runs inside the gateway, whose environment holds the model key and bot token (the
  // scrub only covers the tools' child processes). /proc files report size 0, so nothing is read.
  it.runIf(process.platform === "linux")(
    "shows nothing of the gateway's own environment through /proc/self/environ",
    async () => {
      const tool = createReadFileTool();
      const result = await tool.execute({ path: "/proc/self/environ" }, { cwd, signal });
      expect(result.output).not.toContain("PATH=");
      expect(result.output).toBe("(empty file)");
    },
  );
});
