/**
 * `npm start`'s first step: builds dist/ when it is missing or older than src/. A clone's
 * `npm install` no longer builds (the packed tarball ships dist/, built on `prepack`), so the
 * README's `npm install && npm start` builds here, once; later starts skip it.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ENTRY = join("dist", "bundle", "main.js");

function newestSource() {
  let newest = 0;
  for (const name of readdirSync("src", { recursive: true, encoding: "utf8" })) {
    if (!name.endsWith(".ts") || name.endsWith(".test.ts")) continue;
    newest = Math.max(newest, statSync(join("src", name)).mtimeMs);
  }
  return newest;
}

if (!existsSync(ENTRY) || statSync(ENTRY).mtimeMs < newestSource()) {
  console.error("Building dist/ (npm run build)...");
  execFileSync("npm", ["run", "--silent", "build"], { stdio: "inherit" });
}
