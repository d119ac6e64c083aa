#!/usr/bin/env node
// Thin launcher: the bundled entry lives in dist/bundle/ (`npm run build`: tsc into dist/, then
// scripts/bundle.mjs). The packed tarball ships it (built on `prepack`); a clone builds it with
// `npm start`, `npm test` or `npm run build`.

// Node 22.8 and later keep V8's compiled code for the bundle between starts (in the OS's temp
// folder; NODE_COMPILE_CACHE names another, NODE_DISABLE_COMPILE_CACHE=1 turns it off), so a
// start skips compiling what the previous one compiled. Node 20 has no such cache.
process.getBuiltinModule?.("node:module").enableCompileCache?.();
const entry = new URL("../dist/bundle/main.js", import.meta.url);
const { existsSync } = await import("node:fs");
if (!existsSync(entry)) {
  process.stderr.write("keel: dist/ is not built: run `npm run build` in the clone first.\n");
  process.exit(1);
}
await import(entry.href);
