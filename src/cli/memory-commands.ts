/** `keel memory show USER` / `keel memory clear USER`: one chat user's memory file. */
import { isMemoryUser, MemoryFile } from "../memory/memory-file.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";

function fileOf(user: string, options: GlobalOptions, io: CliIo): MemoryFile | number {
  if (!isMemoryUser(user)) {
    io.err(`"${user}" is not a user: write it as <platform>-<user id>, e.g. telegram-4242.`);
    return EXIT.usage;
  }
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  return new MemoryFile(loaded.loaded.config.home, user);
}

export async function memoryShow(user: string, options: GlobalOptions, io: CliIo): Promise<number> {
  const file = fileOf(user, options, io);
  if (typeof file === "number") return file;
  const text = file.read().trim();
  io.out(text ? text : `${user} has no memory saved.`);
  return EXIT.ok;
}

export async function memoryClear(
  user: string,
  options: GlobalOptions,
  io: CliIo,
): Promise<number> {
  const file = fileOf(user, options, io);
  if (typeof file === "number") return file;
  io.out(file.clear() ? `Cleared the memory of ${user}.` : `${user} had no memory saved.`);
  return EXIT.ok;
}
