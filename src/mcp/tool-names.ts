/**
 * How MCP tools are named for the model: `<server>__<tool>`, as openclaw does. Characters other
 * than `[A-Za-z0-9_-]` become `-`, and the whole name fits OpenAI's 64-character limit for
 * function names; a name taken already gets `-2`, `-3`, … in the order tools are listed.
 */

const MAX_NAME_CHARS = 64;

/** The model-facing names of `toolNames` from server `server`, in order. */
export function modelToolNames(server: string, toolNames: readonly string[]): string[] {
  const taken = new Set<string>();
  return toolNames.map((tool) => {
    const base = `${server}__${tool.replace(/[^A-Za-z0-9_-]/g, "-")}`.slice(0, MAX_NAME_CHARS);
    let name = base;
    for (let n = 2; taken.has(name); n++) {
      const suffix = `-${n}`;
      name = base.slice(0, MAX_NAME_CHARS - suffix.length) + suffix;
    }
    taken.add(name);
    return name;
  });
}
