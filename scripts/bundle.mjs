/**
 * The second half of `npm run build`: bundles the compiled CLI and gateway (dist/main.js) into
 * dist/bundle/, which bin/keel.js runs. Resolving and loading some 250 module files was most of
 * the start-up (bench: spawn to /readyz about 560 ms unbundled, 340 ms bundled, idle machine).
 *
 * Left outside the bundle, loaded from node_modules as before: native or worker-based packages
 * (better-sqlite3, pg, pino) and the platform and MCP SDKs, which load only when configured and
 * locate their own files at run time. Platform adapters stay lazy: each is its own chunk.
 */
import { readFileSync, rmSync } from "node:fs";
import { build } from "esbuild";

const EXTERNAL = [
  "better-sqlite3",
  "pg",
  "pino",
  "grammy",
  "ws",
  "@discordjs/*",
  "discord-api-types",
  "@slack/*",
  // Email's IMAP, SMTP and MIME libraries: loaded only when email is configured.
  "imapflow",
  "nodemailer",
  "mailparser",
  "@modelcontextprotocol/sdk",
  // The browser tool's driver: loaded on its first call, finds its own files at run time.
  "playwright-core",
  // They load their WebAssembly files from beside their own code (the approvals' shell grammar).
  "web-tree-sitter",
  "tree-sitter-bash",
];

// Chunk names carry content hashes: start empty, so no chunk of an earlier build lingers.
rmSync("dist/bundle", { recursive: true, force: true });

await build({
  entryPoints: ["dist/main.js"],
  outdir: "dist/bundle",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: EXTERNAL,
  // Bundled CommonJS packages call require() for Node's own modules.
  banner: {
    js: "import { createRequire as keelCreateRequire } from 'node:module'; const require = keelCreateRequire(import.meta.url);",
  },
  // Composed with tsc's maps, so that a stack trace read with --enable-source-maps names src/.
  sourcemap: "linked",
  // No comments or indentation: V8 keeps each script's source for lazy compilation, as two bytes
  // per character if one comment holds a non-ASCII one (main.js was a 4.3 MB heap string).
  // Names stay, so stack traces and logs still name functions.
  minifyWhitespace: true,
  minifySyntax: true,
  // Licence notices of bundled packages go to a file beside each chunk (one "©" would undo it).
  legalComments: "external",
  logLevel: "warning",
});

// Keeps the point of minifying: V8 stores the core bundle's source one byte per character only
// while every character is Latin-1.
const main = readFileSync("dist/bundle/main.js", "utf8");
for (let i = 0; i < main.length; i++) {
  if (main.charCodeAt(i) > 0xff) {
    console.error(
      `dist/bundle/main.js holds a character beyond Latin-1: ${main.slice(i - 40, i + 10)}`,
    );
    process.exit(1);
  }
}
