import { constants } from "node:fs";
import { mkdir, open, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { z } from "zod";
import type { SandboxView } from "../sandbox/sandbox.js";
import { defineTool, errorText, toolError } from "./define-tool.js";
import { type HomeGuard, resolveReal } from "./home-guard.js";
import { describeKind } from "./read-file.js";
import type { SandboxStep, Tool } from "./tool.js";

export interface WriteFileToolOptions {
  /** Refuses paths inside the Keel home (the gateway always sets it). */
  guard?: HomeGuard;
  /**
   * The sandbox's view (`tools.sandbox`): a write outside its writable roots waits for a human.
   * Absent: no sandbox, no question.
   */
  sandbox?: SandboxView;
}

const WriteFileArgs = z.object({
  path: z.string().min(1).describe("File path, relative to the working folder"),
  content: z.string().describe("The complete new content of the file"),
});

/**
 * Non-blocking, so that opening a FIFO fails (ENXIO) instead of waiting for a reader; no
 * following of a symlink swapped in for the checked real path.
 */
const OPEN_FLAGS =
  constants.O_WRONLY |
  constants.O_CREAT |
  constants.O_TRUNC |
  constants.O_NONBLOCK |
  constants.O_NOFOLLOW;

/**
 * The sandbox hook of a file tool: a path outside the writable roots asks. The rule names the
 * real path, so approving it for the session covers that file alone.
 */
export function outsideWritable(
  sandbox: SandboxView,
  tool: string,
): (args: { path: string }) => SandboxStep | null {
  return ({ path }) => {
    const { realPath, writable, hidden } = sandbox.locate(path);
    // Inside the home the tool refuses anyway: no human is asked about a call that cannot run.
    if (writable || hidden) return null;
    return {
      rule: `sandbox:${tool}:${realPath}`,
      reason: `${realPath} is outside the sandbox's writable folders`,
      summary: `${tool} ${path}`,
    };
  };
}

/**
 * Creates the `write_file` tool: writes `content` to `path` (relative to the context's cwd),
 * replacing the file and creating missing parent folders. Not read-only: never re-run after a
 * crash. Paths the guard refuses, existing targets that are not regular files and file-system
 * failures are `isError` results.
 */
export function createWriteFileTool(options: WriteFileToolOptions = {}): Tool {
  return defineTool({
    name: "write_file",
    description:
      "Write a text file, replacing it if it exists and creating parent folders. " +
      "The path is relative to the working folder.",
    schema: WriteFileArgs,
    readOnly: false,
    ...(options.sandbox && { outsideSandbox: outsideWritable(options.sandbox, "write_file") }),
    async run({ path, content }, { cwd }) {
      try {
        const target = options.guard
          ? await options.guard.check(cwd, path)
          : { realPath: await resolveReal(resolve(cwd, path)) };
        if (target.refusal) return toolError(target.refusal);
        const existing = await stat(target.realPath).catch(() => null);
        const problem = existing && describeKind(existing, path);
        if (problem) return toolError(problem);
        await mkdir(dirname(target.realPath), { recursive: true });
        const file = await open(target.realPath, OPEN_FLAGS, 0o666);
        try {
          await file.writeFile(content, "utf8");
        } finally {
          await file.close();
        }
      } catch (error) {
        return toolError(`Could not write ${path}: ${errorText(error)}`);
      }
      return { output: `Wrote ${Buffer.byteLength(content)} bytes to ${path}.`, isError: false };
    },
  });
}
