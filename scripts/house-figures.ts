/**
 * The house's figures, reproducible (`node --import tsx scripts/house-figures.ts [--top N]`):
 * the longest source files and functions in src/ (tests excluded) and the store's methods per
 * role (each interface of `src/sessions/roles.ts`). The budgets are in docs/architecture.md: no
 * function over 80 lines, no source file over 600.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MAX_FILE_LINES = 600;
const MAX_FUNCTION_LINES = 80;

export interface Measure {
  where: string;
  lines: number;
}

/** Every non-test TypeScript file below `dir`, repository-relative. */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(path));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}

/** A function's name as a reader looks for it: `Class.method`, `name`, or `(arrow)` at a line. */
function nameOf(node: ts.Node, source: ts.SourceFile): string {
  const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const own =
    (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isAccessor(node)) &&
    node.name
      ? node.name.getText(source)
      : ts.isConstructorDeclaration(node)
        ? "constructor"
        : ts.isVariableDeclaration(node.parent) || ts.isPropertyAssignment(node.parent)
          ? node.parent.name.getText(source)
          : ts.isPropertyDeclaration(node.parent)
            ? node.parent.name.getText(source)
            : "(anonymous)";
  const owner = ts.isClassLike(node.parent) && node.parent.name ? `${node.parent.name.text}.` : "";
  return `${owner}${own}:${line}`;
}

function isFunctionLike(node: ts.Node): node is ts.FunctionLikeDeclaration {
  return (
    ts.isFunctionDeclaration(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isAccessor(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node)
  );
}

/**
 * A method of an object literal (`{ run() {…} }`, `{ run: () => … }`): measured on its own, like a
 * class's method, and not in the factory that returns the object (`pgInbox` returns the inbox's
 * methods as a class would hold them).
 */
function isObjectMember(node: ts.Node): boolean {
  const holder = ts.isPropertyAssignment(node.parent) ? node.parent.parent : node.parent;
  return ts.isObjectLiteralExpression(holder);
}

/**
 * Lines of every function with a body. `own` leaves out the object-literal methods inside it
 * (measured on their own); `whole` counts every line from its first to its last.
 */
export function functionLengths(path: string): (Measure & { whole: number })[] {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const rel = relative(ROOT, path);
  const out: (Measure & { whole: number })[] = [];
  const span = (node: ts.Node) =>
    source.getLineAndCharacterOfPosition(node.getEnd()).line -
    source.getLineAndCharacterOfPosition(node.getStart(source)).line +
    1;
  /** Lines of the object-literal methods directly inside `node` (not inside other functions). */
  const memberLines = (node: ts.Node): number => {
    let sum = 0;
    const walk = (child: ts.Node) => {
      if (isFunctionLike(child)) {
        if (isObjectMember(child)) sum += span(child);
        return;
      }
      ts.forEachChild(child, walk);
    };
    ts.forEachChild(node, walk);
    return sum;
  };
  const visit = (node: ts.Node) => {
    if (isFunctionLike(node) && node.body) {
      const whole = span(node);
      out.push({
        where: `${rel} ${nameOf(node, source)}`,
        lines: whole - memberLines(node),
        whole,
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The members (methods and properties) of each exported interface in `path`. */
export function interfaceMembers(path: string): Measure[] {
  const text = readFileSync(path, "utf8");
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const out: Measure[] = [];
  for (const statement of source.statements) {
    if (ts.isInterfaceDeclaration(statement)) {
      out.push({ where: statement.name.text, lines: statement.members.length });
    }
  }
  return out;
}

function main(): void {
  const topArg = process.argv.indexOf("--top");
  const top = topArg > 0 ? Number(process.argv[topArg + 1]) : 10;
  const files = sourceFiles(join(ROOT, "src"));
  const fileLines = files
    .map((path) => ({
      where: relative(ROOT, path),
      lines: readFileSync(path, "utf8").split("\n").length - 1,
    }))
    .sort((a, b) => b.lines - a.lines);
  const functions = files.flatMap(functionLengths).sort((a, b) => b.lines - a.lines);
  // ClusterStore sits in its folder (roles.ts re-exports it), roles.ts at its size budget.
  const roles = ["src/sessions/roles.ts", "src/sessions/cluster/role.ts"].flatMap((path) =>
    interfaceMembers(join(ROOT, path)),
  );
  const row = (m: Measure) => `  ${String(m.lines).padStart(5)}  ${m.where}`;
  const over = (list: Measure[], max: number) => list.filter((m) => m.lines > max).length;
  const total = fileLines.reduce((sum, f) => sum + f.lines, 0);
  console.log(`source files in src/ (tests excluded): ${files.length}, ${total} lines`);
  console.log(`files over ${MAX_FILE_LINES} lines: ${over(fileLines, MAX_FILE_LINES)}`);
  const wholeOver = functions.filter((f) => f.whole > MAX_FUNCTION_LINES).length;
  console.log(
    `functions over ${MAX_FUNCTION_LINES} lines: ${over(functions, MAX_FUNCTION_LINES)} ` +
      `(${wholeOver} when a factory counts the methods of the object it returns)`,
  );
  console.log(`\nlongest files:\n${fileLines.slice(0, top).map(row).join("\n")}`);
  console.log(`\nlongest functions:\n${functions.slice(0, top).map(row).join("\n")}`);
  const methods = roles.reduce((sum, r) => sum + r.lines, 0);
  console.log(
    `\nstore members per role (src/sessions/roles.ts and cluster/role.ts, ${methods} in all):`,
  );
  console.log(roles.map(row).join("\n"));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
