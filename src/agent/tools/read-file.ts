import { constants } from "node:fs";
import { open, stat } from "node:fs/promises";
import { resolve } from "node:path";
import { z } from "zod";
import { defineTool, errorText, toolError } from "./define-tool.js";
import { type HomeGuard, resolveReal } from "./home-guard.js";
import type { Tool } from "./tool.js";

export interface ReadFileToolOptions {
  /** Bytes shown at most (default 100,000); longer files are cut with a note. */
  maxBytes?: number;
  /** Refuses paths inside the Keel home (the gateway always sets it). */
  guard?: HomeGuard;
}

const ReadFileArgs = z.object({
  path: z.string().min(1).describe("File path, relative to the working folder"),
});

/**
 * Non-blocking, so that a FIFO swapped in after the check still cannot hang the open; no
 * following of a symlink swapped in for the checked real path.
 */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW;

/**
 * Creates the `read_file` tool: returns a text file's content (path relative to the context's
 * cwd), the first `maxBytes` of it with a note when longer. Read-only, so it may be re-run after
 * a crash. Missing files, folders, binary files, paths the guard refuses and anything that is
 * not a regular file (FIFOs, devices and sockets, which could block forever) are `isError`
 * results.
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
        const target = options.guard
          ? await options.guard.check(cwd, path)
          : { realPath: await resolveReal(resolve(cwd, path)) };
        if (target.refusal) return toolError(target.refusal);
        const problem = describeKind(await stat(target.realPath), path);
        if (problem) return toolError(problem);
        file = await open(target.realPath, OPEN_FLAGS);
      } catch (error) {
        return toolError(describeOpenError(error, path));
      }
      try {
        const info = await file.stat();
        const problem = describeKind(info, path);
        if (problem) return toolError(problem);
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

/** Why a file of this kind is not read, or undefined for a regular file. */
export function describeKind(
  info: { isFile(): boolean; isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean },
  path: string,
): string | undefined {
  if (info.isFile()) return undefined;
  if (info.isDirectory()) return `${path} is a folder, not a file.`;
  const kind = info.isFIFO() ? "a FIFO (named pipe)" : info.isSocket() ? "a socket" : "a device";
  return `${path} is ${kind}, not a regular file; the file tools only use regular files.`;
}

function describeOpenError(error: unknown, path: string): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return `File not found: ${path}`;
  if (code === "EACCES") return `Permission denied: ${path}`;
  return `Could not read ${path}: ${errorText(error)}`;
}
