/**
 * Reading options the way GNU getopt does, for the rules and wrappers that depend on them: short
 * options clustered (`-rf`), values attached or separate (`-n5`, `-n 5`), long options by any
 * unique prefix (`--recur` is `--recursive`), `--` ending them.
 */

/** What a program's options look like: which take a value, and its long options. */
export interface OptionSpec {
  /** Short options that take a value (`-n 5`, `-n5`). */
  shortValue?: string;
  /** Short options whose value may only be attached (`-i{}`, `-e`): never the next word. */
  shortOptional?: string;
  /** Long options that take a value (`--signal KILL`, `--signal=KILL`). */
  longValue?: readonly string[];
  /** Long options without a value, or whose value must be attached with `=`. */
  longFlag?: readonly string[];
  /** `-5` is an option (nice's old form). */
  numeric?: boolean;
}

export interface ReadOptions {
  /** Short option letters and full long option names seen (`r`, `recursive`). */
  flags: Set<string>;
  /** Values by option (`s` → `KILL`, `signal` → `KILL`), in order. */
  values: Map<string, string[]>;
  /** Index of the first operand. */
  end: number;
}

/**
 * Reads options up to the first operand (as `+` in a getopt string: no permuting). An unknown
 * long option counts as a flag under the name written.
 */
export function readOptions(args: readonly string[], spec: OptionSpec): ReadOptions {
  const flags = new Set<string>();
  const values = new Map<string, string[]>();
  const put = (name: string, value: string) =>
    values.set(name, [...(values.get(name) ?? []), value]);
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") return { flags, values, end: i + 1 };
    if (arg.startsWith("--")) {
      const [written, attached] = splitLong(arg);
      const longs = [...(spec.longValue ?? []), ...(spec.longFlag ?? [])];
      const name = resolveLong(written, longs) ?? written;
      flags.add(name);
      if (attached !== undefined) put(name, attached);
      else if (spec.longValue?.includes(name) && i + 1 < args.length) put(name, args[++i]!);
      continue;
    }
    if (!arg.startsWith("-") || arg === "-") break;
    if (spec.numeric && /^-\d+$/.test(arg)) continue;
    for (let j = 1; j < arg.length; j++) {
      const letter = arg[j]!;
      flags.add(letter);
      const rest = arg.slice(j + 1);
      if (spec.shortOptional?.includes(letter)) {
        if (rest) put(letter, rest);
        break;
      }
      if (spec.shortValue?.includes(letter)) {
        if (rest) put(letter, rest);
        else if (i + 1 < args.length) put(letter, args[++i]!);
        break;
      }
    }
  }
  return { flags, values, end: i };
}

/** `--name=value` → [name, value]; `--name` → [name, undefined]. */
function splitLong(arg: string): [string, string | undefined] {
  const eq = arg.indexOf("=");
  return eq === -1 ? [arg.slice(2), undefined] : [arg.slice(2, eq), arg.slice(eq + 1)];
}

/** The long option `written` abbreviates: an exact name, or the only one it is a prefix of. */
export function resolveLong(written: string, names: readonly string[]): string | null {
  if (names.includes(written)) return written;
  const candidates = names.filter((n) => n.startsWith(written));
  return written.length > 0 && candidates.length === 1 ? candidates[0]! : null;
}

/**
 * The options among `args` (anywhere before `--`, as GNU tools permute): short letters, and long
 * options resolved by unique prefix against `longs`.
 */
export function scanOptions(args: readonly string[], longs: readonly string[]): Set<string> {
  const seen = new Set<string>();
  for (const arg of args) {
    if (arg === "--") break;
    if (arg.startsWith("--")) {
      const [written] = splitLong(arg);
      seen.add(resolveLong(written, longs) ?? written);
    } else if (/^-[A-Za-z]+$/.test(arg)) {
      for (const letter of arg.slice(1)) seen.add(letter);
    }
  }
  return seen;
}
