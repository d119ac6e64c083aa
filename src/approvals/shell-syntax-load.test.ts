/**
 * Loading the shell grammar when several callers want it at once (in a file of its own, so the
 * module starts unloaded): two gateways' first commands in one process, or two commands at once.
 */
import { describe, expect, it } from "vitest";
import { loadShellParser } from "./shell-syntax.js";

describe("loading the shell grammar", () => {
  it("gives every caller of a first load side by side a working parser", async () => {
    // web-tree-sitter's runtime loaded twice at once fails on Node 24 ("Incompatible language
    // version 0"): the grammar is loaded once per process.
    const parsers = await Promise.all([loadShellParser(), loadShellParser(), loadShellParser()]);
    for (const parser of parsers) {
      expect(parser.parse("rm -rf build; echo hi").commands.map((c) => c.words[0]?.text)).toEqual([
        "rm",
        "echo",
      ]);
    }
  });
});
