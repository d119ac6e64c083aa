import { createRequire } from "node:module";

/** The package version, read once from package.json (one folder above src/ and dist/). */
export const KEEL_VERSION: string = (
  createRequire(import.meta.url)("../package.json") as { version: string }
).version;
