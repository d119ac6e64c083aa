/**
 * "Did you mean": the known config key paths, read from the schema itself so they never drift,
 * and the closest one to an unknown key (a misplaced section or a misspelling).
 */
import type { z } from "zod";
import { ConfigSchema } from "./schema.js";

type Def = { type: string; innerType?: z.ZodType; shape?: Record<string, z.ZodType> };

function objectShape(schema: z.ZodType): Record<string, z.ZodType> | null {
  let def = schema._zod.def as unknown as Def;
  // Unwrap optional/default/prefault/nullable until the object (or something that is not one).
  while (def.innerType && def.type !== "object") def = def.innerType._zod.def as unknown as Def;
  return def.type === "object" && def.shape ? def.shape : null;
}

function collectPaths(schema: z.ZodType, prefix: string[], out: string[][]): void {
  const shape = objectShape(schema);
  if (!shape) return;
  for (const [key, child] of Object.entries(shape)) {
    out.push([...prefix, key]);
    collectPaths(child, [...prefix, key], out);
  }
}

let cached: string[][] | null = null;

/** Every key path the schema accepts, sections included (`platforms`, `platforms.telegram`, ...). */
export function knownKeyPaths(): readonly string[][] {
  if (!cached) {
    cached = [];
    collectPaths(ConfigSchema, [], cached);
  }
  return cached;
}

/**
 * Edit distance counting a swap of two neighbours as one edit (optimal string alignment), so
 * `modle` is as close to `model` as `mdoel`; names are short, so the plain table is enough.
 */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

const normalise = (key: string) => key.toLowerCase().replace(/-/g, "_");

/**
 * The key path an unknown `key` under `parent` was probably meant to be: a sibling within a
 * small edit distance, else the same (or a nearly same) key in another section. Null when
 * nothing is close.
 */
export function suggestKey(parent: readonly string[], key: string): string | null {
  const wanted = normalise(key);
  const tolerance = Math.max(1, Math.floor(wanted.length / 4));
  const paths = knownKeyPaths();
  const depth = parent.length;
  const sameParent = (p: string[]) =>
    p.length === depth + 1 && parent.every((segment, i) => p[i] === segment);
  let best: { path: string[]; score: number } | null = null;
  for (const path of paths) {
    const last = path[path.length - 1]!;
    const distance = editDistance(wanted, last);
    if (distance > tolerance) continue;
    // Siblings first, then shallow paths: `telegram` at the top is `platforms.telegram`.
    const score = distance * 10 + (sameParent(path) ? 0 : 5) + path.length;
    if (!best || score < best.score) best = { path, score };
  }
  if (!best) return null;
  const suggestion = best.path.join(".");
  return suggestion === [...parent, key].join(".") ? null : suggestion;
}

/**
 * The variable in `known` closest to `name` (a misspelling), or null when none is close. Names
 * share their prefix (`KEEL_`), so closeness is judged on what follows it.
 */
export function suggestName(
  name: string,
  known: readonly string[],
  prefix = "KEEL_",
): string | null {
  const tail = (n: string) => (n.startsWith(prefix) ? n.slice(prefix.length) : n);
  const wanted = tail(name);
  const tolerance = Math.max(1, Math.floor(wanted.length / 4));
  let best: { name: string; distance: number } | null = null;
  for (const candidate of known) {
    const distance = editDistance(wanted, tail(candidate));
    if (distance <= tolerance && (!best || distance < best.distance)) {
      best = { name: candidate, distance };
    }
  }
  return best?.name ?? null;
}
