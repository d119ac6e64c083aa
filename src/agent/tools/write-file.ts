import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import { defineTool, errorText, toolError } from "./define-tool.js";
import type { Tool } from "./tool.js";

const WriteFileArgs = z.object({
  path: z.string().min(1).describe("File path, relative to the working folder"),
  content: z.string().describe("The complete new content of the file"),
});

/**
 * Creates the `write_file` tool: writes `content` to `path` (relative to the context's cwd),
 * replacing the file and creating missing parent folders. Not read-only: never re-run after a
 * crash. File-system failures are `isError` results.
 */
export function createWriteFileTool(): Tool {
  return defineTool({
    name: "write_file",
    description:
      "Write a text file, replacing it if it exists and creating parent folders. " +
      "The path is relative to the working folder.",
    schema: WriteFileArgs,
    readOnly: false,
    async run({ path, content }, { cwd }) {
      const target = resolve(cwd, path);
      try {
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, content, "utf8");
      } catch (error) {
        return toolError(`Could not write ${path}: ${errorText(error)}`);
      }
      return { output: `Wrote ${Buffer.byteLength(content)} bytes to ${path}.`, isError: false };
    },
  });
}
