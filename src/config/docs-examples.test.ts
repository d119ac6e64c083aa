/**
 * Every ```yaml block in README.md and docs/*.md is a config.yaml example: each must load with
 * the real loader (the `${NAME}` variables it references set to placeholders), with no warning.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../test/helpers/gateway-process.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { loadConfig } from "./load-config.js";

function yamlBlocks(file: string): { file: string; line: number; text: string }[] {
  const lines = readFileSync(file, "utf8").split("\n");
  const blocks: { file: string; line: number; text: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```ya?ml\s*$/.test(lines[i]!)) continue;
    const indent = lines[i]!.indexOf("`");
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++;
    const text = lines
      .slice(start, end)
      .map((l) => l.slice(indent))
      .join("\n");
    blocks.push({ file, line: start, text });
    i = end;
  }
  return blocks;
}

const docs = [
  join(REPO_ROOT, "README.md"),
  ...readdirSync(join(REPO_ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => join(REPO_ROOT, "docs", f)),
];
const examples = docs.flatMap(yamlBlocks);

describe("config examples in the docs", () => {
  it("the README has at least one", () => {
    expect(examples.some((e) => e.file.endsWith("README.md"))).toBe(true);
  });

  it.each(examples.map((e) => [`${e.file.slice(REPO_ROOT.length + 1)}:${e.line}`, e.text]))(
    "%s loads",
    (_where, text) => {
      const dir = createTempDir();
      try {
        writeFileSync(join(dir.path, "config.yaml"), text);
        const env = Object.fromEntries(
          [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => [
            m[1]!,
            `placeholder-${m[1]}`,
          ]),
        );
        const { warnings } = loadConfig({ home: dir.path, env });
        expect(warnings).toEqual([]);
      } finally {
        dir.cleanup();
      }
    },
  );
});
