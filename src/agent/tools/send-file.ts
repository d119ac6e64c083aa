import { randomUUID } from "node:crypto";
import { copyFile, mkdir, stat } from "node:fs/promises";
import { basename, isAbsolute, join, relative } from "node:path";
import { z } from "zod";
import { formatSize, mimeOf } from "../media/file-kind.js";
import type { SandboxView } from "../sandbox/sandbox.js";
import { defineTool, errorText, toolError } from "./define-tool.js";
import { type HomeGuard, resolveReal } from "./home-guard.js";
import type { Tool } from "./tool.js";
import { outsideWritable } from "./write-file.js";

/**
 * Platforms whose adapters deliver a file (Telegram, WhatsApp and Matrix upload it, email attaches
 * it, the web chat and the API link it).
 * Discord and Slack have no upload yet: refused here, so the model can tell the user instead of
 * believing a file went out.
 */
export const FILE_PLATFORMS = new Set([
  "telegram",
  "webchat",
  "api",
  "whatsapp",
  "email",
  "matrix",
]);

/** The largest file a bot may upload to Telegram, and so the largest Keel sends anywhere. */
export const MAX_SEND_BYTES = 50 * 1_048_576;

export interface SendFileToolOptions {
  guard: HomeGuard;
  /** Where Keel keeps the copies it sends (`$KEEL_HOME/files`), served at `/files/<id>`. */
  filesDir: string;
  /**
   * The sandbox's view (`tools.sandbox`): a file outside its writable roots is sent once a human
   * approves. Absent: only files under the working folder are sent, never asked.
   */
  sandbox?: SandboxView;
}

const SendFileArgs = z.object({
  path: z.string().min(1).describe("File to send, relative to the working folder"),
  caption: z.string().optional().describe("Short text shown with the file"),
});

/**
 * Creates the `send_file` tool: sends a file from the working folder to the chat the turn
 * answers. The file is copied first, so what arrives is what the agent sent even if it changes
 * the file afterwards; the copy is queued through the outbox with the tool's result (exactly
 * once). Not read-only: never re-run after a crash.
 */
export function createSendFileTool(options: SendFileToolOptions): Tool {
  return defineTool({
    name: "send_file",
    description:
      "Send a file from the working folder to the user in this chat (images are shown as " +
      "photos). Up to 50 MB. The path is relative to the working folder.",
    schema: SendFileArgs,
    readOnly: false,
    ...(options.sandbox && { outsideSandbox: outsideWritable(options.sandbox, "send_file") }),
    async run({ path, caption }, { cwd, chat }) {
      if (!chat) return toolError("This turn has no chat to send a file to.");
      if (!FILE_PLATFORMS.has(chat.platform)) {
        return toolError(
          `Files cannot be sent to ${chat.platform} yet; tell the user the file's path instead.`,
        );
      }
      try {
        const target = await options.guard.check(cwd, path);
        if (target.refusal) return toolError(target.refusal);
        // With a sandbox, a path outside its writable roots was approved before the call ran.
        const realCwd = await resolveReal(cwd);
        const rel = relative(realCwd, target.realPath);
        if (!options.sandbox && (rel.startsWith("..") || isAbsolute(rel))) {
          return toolError(`Refused: ${path} is outside the working folder (${realCwd}).`);
        }
        const info = await stat(target.realPath).catch(() => null);
        if (!info) return toolError(`No such file: ${path}`);
        if (!info.isFile()) return toolError(`${path} is not a regular file.`);
        if (info.size === 0) return toolError(`${path} is empty; there is nothing to send.`);
        if (info.size > MAX_SEND_BYTES) {
          return toolError(
            `${path} is ${formatSize(info.size)}; files up to ${formatSize(MAX_SEND_BYTES)} can be sent.`,
          );
        }
        const id = randomUUID();
        await mkdir(options.filesDir, { recursive: true, mode: 0o700 });
        const copy = join(options.filesDir, id);
        await copyFile(target.realPath, copy);
        const name = basename(target.realPath);
        const file = { id, path: copy, name, mime: mimeOf(name), size: info.size };
        return {
          output: `Queued ${name} (${formatSize(info.size)}) for the chat; link: /files/${id}`,
          isError: false,
          sentFile: { file, caption: caption ?? "" },
        };
      } catch (error) {
        return toolError(`Could not send ${path}: ${errorText(error)}`);
      }
    },
  });
}
