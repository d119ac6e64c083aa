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
import { dirname, join } from "node:path";
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

/**
 * zod's namespace re-exports every locale's messages (`z.locales`, some 300 KB of the 2 MB core
 * bundle, compiled on every start). Keel never picks one: zod registers English itself, from its
 * own import of en.js. The namespace keeps `en` only.
 */
const englishOnlyZodLocales = {
  name: "english-only-zod-locales",
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      args.importer.includes("/node_modules/zod/")
        ? { path: join(args.resolveDir, "../locales/index.js"), namespace: "zod-locales" }
        : undefined,
    );
    pluginBuild.onLoad({ filter: /.*/, namespace: "zod-locales" }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: dirname(args.path),
    }));
  },
};

/**
 * CommonJS packages the bundle imports: loaded with require() instead of import. For a CommonJS
 * module imported by an ES module, Node first lexes its source for the named exports, with a
 * lexer written in JavaScript: pino, better-sqlite3, grammY and ws on every start, enough for V8
 * to optimize the lexer each time (`--trace-opt`: 100 to 300 ms of a compiler thread under load).
 * require() needs no lexing: the bundle reads the names from module.exports. The code loaded is
 * the same CommonJS either way (ws's import entry is an ES wrapper around it).
 */
const REQUIRED_CJS = new Set([
  "better-sqlite3",
  "pino",
  "grammy",
  "ws",
  "@slack/socket-mode",
  "@slack/web-api",
]);

const requireCommonJsExternals = {
  name: "require-commonjs-externals",
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^[@a-z]/ }, (args) => {
      if (!REQUIRED_CJS.has(args.path)) return undefined;
      if (args.namespace === "required-cjs") return { path: args.path, external: true };
      // A dynamic import of one would come back with a default export only: those stay imports.
      if (args.kind !== "import-statement") return undefined;
      return { path: args.path, namespace: "required-cjs" };
    });
    pluginBuild.onLoad({ filter: /.*/, namespace: "required-cjs" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

// Chunk names carry content hashes: start empty, so no chunk of an earlier build lingers.
rmSync("dist/bundle", { recursive: true, force: true });

const result = await build({
  entryPoints: ["dist/main.js"],
  outdir: "dist/bundle",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: EXTERNAL,
  plugins: [englishOnlyZodLocales, requireCommonJsExternals],
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
  metafile: true,
});

// Keeps the point of minifying: V8 stores a script's source one byte per character only while
// every character is Latin-1. Checked for what every start loads: main.js and the chunks it
// imports statically (chunks imported on use load only when used).
for (const file of startFiles(result.metafile, "dist/bundle/main.js")) {
  const text = readFileSync(file, "utf8");
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0xff) {
      console.error(`${file} holds a character beyond Latin-1: ${text.slice(i - 40, i + 10)}`);
      process.exit(1);
    }
  }
}

/** `entry` and every output file it imports statically, directly or not. */
function startFiles(metafile, entry) {
  const files = new Set();
  const pending = [entry];
  while (pending.length > 0) {
    const file = pending.pop();
    if (files.has(file)) continue;
    files.add(file);
    for (const imported of metafile.outputs[file].imports) {
      if (imported.kind === "import-statement" && !imported.external) pending.push(imported.path);
    }
  }
  return [...files];
}
