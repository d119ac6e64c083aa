/**
 * Serves the static web chat page and dashboard (no build step: the files in control/web are
 * sent as they are). The pages hold no data; the data they show comes through `/ws` and `/api`,
 * which check access themselves.
 */
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { Hono } from "hono";
import type { AppEnv } from "./http-server.js";

// Two levels below the package root in src/, dist/ and the bundle (dist/bundle/).
const WEB_DIR = fileURLToPath(new URL("../../src/control/web/", import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};

/** Only these names are served: never tests, type declarations or anything outside the folder. */
const STATIC_FILE = /^[a-z][a-z0-9-]*\.(html|js|css)$/;

export function createWebRoutes(): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const send = async (name: string) => {
    const ext = name.split(".").pop()!;
    const body = await readFile(`${WEB_DIR}${name}`);
    return new Response(body, {
      headers: {
        "content-type": CONTENT_TYPES[ext]!,
        "cache-control": "no-cache",
        "x-content-type-options": "nosniff",
        "content-security-policy":
          "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
      },
    });
  };
  app.get("/", () => send("index.html"));
  app.get("/dashboard", () => send("dashboard.html"));
  app.get("/:file", async (c, next) => {
    const file = c.req.param("file");
    if (!STATIC_FILE.test(file) || file.endsWith(".test.js")) return next();
    try {
      return await send(file);
    } catch {
      return next();
    }
  });
  return app;
}
