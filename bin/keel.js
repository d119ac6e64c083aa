#!/usr/bin/env node
// Thin launcher: the bundled entry lives in dist/bundle/ (built by `npm install` via the prepare
// script: tsc into dist/, then scripts/bundle.mjs).
import "../dist/bundle/main.js";
