#!/usr/bin/env node
// Thin launcher: the compiled entry lives in dist/ (built by `npm install` via the prepare script).
import "../dist/main.js";
