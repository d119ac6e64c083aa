/**
 * config.yaml as data plus where each key sits in the file, so every problem can be reported as
 * `config.yaml:LINE: key: what is wrong`. Syntax errors are all collected, not just the first.
 */
import { isMap, isScalar, LineCounter, type Node, parseDocument } from "yaml";

export interface YamlSource {
  /** The parsed document as plain data (null for an empty file). */
  data: unknown;
  /** `file:LINE` (1-based) of the key at `path`, or plain `file` when it cannot be found. */
  where(path: readonly (string | number)[]): string;
  /** Syntax and structure problems, each already prefixed with its location. */
  problems: string[];
}

export function parseYamlSource(file: string, text: string): YamlSource {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false });
  const at = (offset: number | undefined) =>
    offset === undefined ? file : `${file}:${lineCounter.linePos(offset).line}`;
  // One message per line: a single mistake often derails the parser several times on its line.
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const err of doc.errors) {
    const location = at(err.pos[0]);
    if (seen.has(location)) continue;
    seen.add(location);
    const line = `${location}: not valid YAML: ${err.message.split("\n")[0]}`;
    // `${NAME}` unquoted inside `{ ... }` ends the flow map at its brace: say how to write it.
    problems.push(
      lineOf(text, err.pos[0]).includes("${")
        ? `${line} (quote values that reference the environment: "\${NAME}")`
        : line,
    );
  }
  const where = (path: readonly (string | number)[]): string => {
    const node = findKeyNode(doc.contents, path);
    return at(node?.range?.[0]);
  };
  if (problems.length > 0) return { data: null, where, problems };
  try {
    return { data: doc.toJS({ maxAliasCount: 100 }), where, problems };
  } catch (err) {
    // e.g. an alias expanded past maxAliasCount (a "billion laughs" document).
    return { data: null, where, problems: [`${file}: not valid YAML: ${(err as Error).message}`] };
  }
}

function lineOf(text: string, offset: number): string {
  const start = text.lastIndexOf("\n", offset - 1) + 1;
  const end = text.indexOf("\n", offset);
  return text.slice(start, end === -1 ? undefined : end);
}

/** The key node at `path` (its value node when the last step is a list index), else the nearest parent. */
function findKeyNode(root: unknown, path: readonly (string | number)[]): Node | null {
  let node = root as Node | null;
  let found: Node | null = node;
  for (const step of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(step));
      if (!pair) return found;
      found = (pair.key as Node) ?? found;
      node = pair.value as Node | null;
    } else if (node && "items" in node && Array.isArray((node as { items: unknown[] }).items)) {
      const item = (node as unknown as { items: Node[] }).items[Number(step)];
      if (!item) return found;
      found = item;
      node = item;
    } else {
      return found;
    }
  }
  return found;
}
