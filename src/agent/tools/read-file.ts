import { open } from "node:fs/promises";
import { resolve } from "node:path";
import { z } from "zod";
import { defineTool, errorText, toolError } from "./define-tool.js";
import type { Tool } from "./tool.js";

export interface ReadFileToolOptions {
  /** Bytes shown at most (default 100,000); longer files are cut with a note. */
  maxBytes?: number;
}

const ReadFileArgs = z.object({
  path: z.string().min(1).describe("File path, relative to the working folder"),
});

/**
 * Creates the `read_file` tool: returns a text file's content (path relative to the context's
 * cwd), the first `maxBytes` of it with a note when longer. Read-only, so it may be re-run after
 * a crash. Missing files, folders and binary files are `isError` results.
 */
export function createReadFileTool(options: ReadFileToolOptions = {}): Tool {
  const maxBytes = options.maxBytes ?? 100_000;
  return defineTool({
    name: "read_file",
    description: "Read a text file. The path is relative to the working folder.",
    schema: ReadFileArgs,
    readOnly: true,
    async run({ path }, { cwd }) {
      let file: Awaited<ReturnType<typeof open>>;
      try {
        file = await open(resolve(cwd, path), "r");
      } catch (error) {
        return toolError(describeOpenError(error, path));
      }
      try {
        const info = await file.stat();
        if (info.isDirectory()) return toolError(`${path} is a folder, not a file.`);
        const buffer = Buffer.alloc(Math.min(info.size, maxBytes));
        const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
        const bytes = buffer.subarray(0, bytesRead);
        if (bytes.subarray(0, 8192).includes(0)) {
          return toolError(`${path} looks like a binary file (${info.size} bytes); not shown.`);
        }
        if (info.size === 0) return { output: "(empty file)", isError: false };
        // A cut may split a multi-byte character; drop the broken tail rather than show U+FFFD.
        const text = bytes.toString("utf8").replace(/\uFFFD+$/, "");
        if (info.size <= maxBytes) return { output: text, isError: false };
        const note = `[file truncated: showing the first ${bytesRead} of ${info.size} bytes]`;
        return { output: `${text}\n\n${note}`, isError: false };
      } finally {
        await file.close();
      }
    },
  });
}

function describeOpenError(error: unknown, path: string): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return `File not found: ${path}`;
  if (code === "EACCES") return `Permission denied: ${path}`;
  return `Could not read ${path}: ${errorText(error)}`;
}
