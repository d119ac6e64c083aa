#!/usr/bin/env node
// Thin launcher: the bundled entry lives in dist/bundle/ (built by `npm install` via the prepare
// script: tsc into dist/, then scripts/bundle.mjs).

// Node 22.8 and later keep V8's compiled code for the bundle between starts (in the OS's temp
// folder; NODE_COMPILE_CACHE names another, NODE_DISABLE_COMPILE_CACHE=1 turns it off), so a
// start skips compiling what the previous one compiled. Node 20 has no such cache.
process.getBuiltinModule?.("node:module").enableCompileCache?.();
await import("../dist/bundle/main.js");
