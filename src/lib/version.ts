import { createRequire } from "node:module";

/**
 * The package version, read once from package.json, two folders up: from src/lib/, from
 * dist/lib/ and from the bundle in dist/bundle/ alike.
 */
export const KEEL_VERSION: string = (
  createRequire(import.meta.url)("../../package.json") as { version: string }
).version;
