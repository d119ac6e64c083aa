/**
 * The newcomer's path of the README, end to end: a fresh `git clone` of this repository into a
 * temporary folder, `npm install` there (which does not build), the build `npm start` runs first,
 * `npm pack` (which builds again on `prepack`, so the tarball ships dist/), a global install of
 * the tarball into a temporary prefix (which builds nothing), and then the installed `keel` found
 * on the PATH:
 * `--version`, `setup --yes --model-url <stand-in model>`, `doctor`, a `chat` round trip, and
 * `gateway start` / `status` / `chat` through it / `stop`. Dependencies come from the npm cache
 * or the registry (`--prefer-offline`); one install serves every test of the file (slow: minutes).
 * The clone is of the repository's committed HEAD: uncommitted changes are not in it.
 *
 * better-sqlite3's own install step downloads a prebuilt binary and compiles only when none is
 * reachable. This machine cannot reach its download host, and the compile takes minutes on two
 * shared cores, so the test plays that host on 127.0.0.1: it serves the binary this checkout
 * already uses (same Node, same ABI) under the name prebuild-install asks for, through
 * better-sqlite3's documented `npm_config_better_sqlite3_binary_host` setting. A request for
 * another ABI gets 404, and the install falls back to compiling, as on a user's machine.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  childEnv,
  freePort,
  killQuietly,
  REPO_ROOT,
  readGatewayPid,
} from "../helpers/gateway-process.js";

const INSTALL_TIMEOUT_MS = 15 * 60_000;

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion (asynchronously: the stand-in servers live in this process). */
function run(
  argv: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<Ran> {
  const child = spawn(argv[0]!, argv.slice(1), {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? npmFreeEnv(),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  child.stdin.end(options.input ?? "");
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`${argv.join(" ")} timed out\n${stdout}\n${stderr}`));
    }, options.timeoutMs ?? 60_000);
    child.once("error", fail);
    child.once("close", (code) => {
      clearTimeout(timer);
      done({ code, stdout, stderr });
    });
  });
}

/** The test's environment without what an enclosing `npm test` exported (npm_config_*, ...). */
function npmFreeEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = childEnv(extra);
  for (const name of Object.keys(env)) {
    if (name.startsWith("npm_") && !(name in extra)) delete env[name];
  }
  return env;
}

/** Serves this checkout's better-sqlite3 binary where prebuild-install looks for it. */
async function startPrebuiltHost(
  root: string,
): Promise<{ url: string; hits: string[]; close(): Promise<void> }> {
  const pkg = JSON.parse(
    readFileSync(join(REPO_ROOT, "node_modules", "better-sqlite3", "package.json"), "utf8"),
  ) as { version: string };
  const tarball = join(root, "prebuilt.tar.gz");
  const packed = await run([
    "tar",
    "czf",
    tarball,
    "-C",
    join(REPO_ROOT, "node_modules", "better-sqlite3"),
    "build/Release/better_sqlite3.node",
  ]);
  expect(packed.code, packed.stderr).toBe(0);
  const wanted = `/v${pkg.version}/better-sqlite3-v${pkg.version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const hits: string[] = [];
  const server: Server = createServer((req, res) => {
    hits.push(req.url ?? "");
    if (req.url === wanted) {
      res.writeHead(200, { "content-type": "application/gzip" });
      res.end(readFileSync(tarball));
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () => new Promise((done) => server.close(() => done())),
  };
}

describe.skipIf(!existsSync(join(REPO_ROOT, ".git")))(
  "the newcomer's path: clone, install, pack, keel",
  () => {
    let root: string;
    let clone: string;
    let prefix: string;
    let fake: FakeOpenAI;
    let cloned: Ran;
    let cloneInstall: Ran;
    /** Whether the clone had a dist/ right after `npm install`. */
    let builtByInstall = false;
    let startBuild: Ran;
    let packed: Ran;
    let installed: Ran;
    let prebuiltHits: string[] = [];
    let home: string;

    beforeAll(async () => {
      root = mkdtempSync(join(tmpdir(), "keel-newcomer-"));
      clone = join(root, "keel");
      prefix = join(root, "prefix");
      home = join(root, "home");
      fake = await startFakeOpenAI();
      const host = await startPrebuiltHost(root);
      const npmEnv = npmFreeEnv({ npm_config_better_sqlite3_binary_host: host.url });
      const npm = (args: string[], cwd: string) =>
        run(["npm", ...args, "--prefer-offline", "--no-audit", "--no-fund"], {
          cwd,
          env: npmEnv,
          timeoutMs: INSTALL_TIMEOUT_MS,
        });
      try {
        cloned = await run(["git", "clone", "--quiet", REPO_ROOT, clone], { cwd: root });
        if (cloned.code !== 0) return;
        cloneInstall = await npm(["install"], clone);
        if (cloneInstall.code !== 0) return;
        builtByInstall = existsSync(join(clone, "dist"));
        // What `npm start` runs before the gateway (the README's quick start).
        startBuild = await run(["node", "scripts/build-if-stale.mjs"], {
          cwd: clone,
          env: npmEnv,
          timeoutMs: INSTALL_TIMEOUT_MS,
        });
        if (startBuild.code !== 0) return;
        packed = await npm(["pack", "--pack-destination", root], clone);
        const tgz = readdirSync(root).find((f) => f.endsWith(".tgz"));
        if (packed.code !== 0 || tgz === undefined) return;
        installed = await npm(["install", "--global", "--prefix", prefix, join(root, tgz)], root);
      } finally {
        prebuiltHits = host.hits;
        await host.close();
      }
    }, 3 * INSTALL_TIMEOUT_MS);

    afterAll(async () => {
      // A gateway a failed test left running (its pid file names it).
      const pid = home ? readGatewayPid(home)?.pid : undefined;
      if (pid) killQuietly(pid, "SIGKILL");
      await fake?.close();
      // Two node_modules trees: removing them takes a while on a busy machine.
      if (root) rmSync(root, { recursive: true, force: true });
    }, 5 * 60_000);

    /** The installed `keel`, found on the PATH as a user's shell finds it; HOME is the temp root. */
    const keel = (args: string[], options: { env?: Record<string, string>; input?: string } = {}) =>
      run(["keel", "--home", home, ...args], {
        cwd: root,
        env: npmFreeEnv({
          PATH: `${join(prefix, "bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
          HOME: root,
          ...options.env,
        }),
        ...(options.input !== undefined && { input: options.input }),
      });

    it("npm install in the fresh clone installs without building; npm start's first step builds", () => {
      expect(cloned.code, cloned.stderr).toBe(0);
      expect(cloneInstall.code, `${cloneInstall.stdout}\n${cloneInstall.stderr}`).toBe(0);
      expect(builtByInstall).toBe(false);
      expect(startBuild.code, startBuild.stderr).toBe(0);
      expect(startBuild.stderr).toContain("Building dist/");
      expect(existsSync(join(clone, "dist", "bundle", "main.js"))).toBe(true);
      // better-sqlite3 took the prebuilt path (no compile), as a user with network access gets.
      expect(prebuiltHits.length).toBeGreaterThan(0);
      expect(packed.code, packed.stderr).toBe(0);
    });

    it("npm install -g of the packed tarball puts a working keel on the PATH, building nothing", async () => {
      expect(installed.code, `${installed.stdout}\n${installed.stderr}`).toBe(0);
      expect(existsSync(join(prefix, "bin", "keel"))).toBe(true);
      // The tarball carries the build: nothing of Keel's own runs at install (npm would name it
      // among the "install scripts not yet covered by allowScripts"), only better-sqlite3's.
      const installedDir = join(prefix, "lib", "node_modules", "keel");
      const manifest = JSON.parse(readFileSync(join(installedDir, "package.json"), "utf8")) as {
        scripts: Record<string, string>;
      };
      for (const hook of ["preinstall", "install", "postinstall", "prepare"]) {
        expect(manifest.scripts[hook], hook).toBeUndefined();
      }
      expect(`${installed.stdout}\n${installed.stderr}`).not.toMatch(/keel@[\d.]+ \(/);
      expect(existsSync(join(installedDir, "dist", "bundle", "main.js"))).toBe(true);
      expect(existsSync(join(installedDir, "src", "control", "web", "chat.js"))).toBe(true);
      const version = await keel(["--version"]);
      expect(version.code).toBe(0);
      const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
        version: string;
      };
      expect(version.stdout.trim()).toBe(pkg.version);
    });

    it("the installed keel: setup, doctor, chat, then gateway start, status, chat, stop", async () => {
      const env = { KEEL_HTTP_PORT: String(await freePort()) };
      const setup = await keel(["setup", "--yes", "--model-url", fake.baseUrl], { env });
      expect(setup.code, `${setup.stdout}\n${setup.stderr}`).toBe(0);
      expect(existsSync(join(home, "config.yaml"))).toBe(true);

      const doctor = await keel(["doctor"], { env });
      expect(doctor.code, `${doctor.stdout}\n${doctor.stderr}`).toBe(0);
      expect(doctor.stdout).toMatch(/^✓ store: /m);
      expect(doctor.stdout).toMatch(/^✓ model: /m);

      // No gateway yet: the chat runs one in-process.
      const alone = await keel(["chat"], { env, input: "echo: hello from a newcomer\n" });
      expect(alone.code, alone.stderr).toBe(0);
      expect(alone.stdout).toBe("hello from a newcomer\n");
      expect(alone.stderr).toMatch(/no gateway running/);

      const started = await keel(["gateway", "start"], { env });
      expect(started.code, `${started.stdout}\n${started.stderr}`).toBe(0);
      expect(started.stdout).toMatch(/Gateway started \(pid \d+\)/);
      const pid = readGatewayPid(home)?.pid;
      expect(pid).toBeDefined();

      const status = await keel(["gateway", "status", "--json"], { env });
      expect(status.code).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ running: true, pid, source: "api" });

      // Through the running gateway now, with the tool call shown as it runs.
      const viaGateway = await keel(["chat"], { env, input: "run: echo newcomer-tool\n" });
      expect(viaGateway.code, viaGateway.stderr).toBe(0);
      expect(viaGateway.stderr).not.toMatch(/no gateway running/);
      expect(viaGateway.stderr).toContain("⚙ terminal: echo newcomer-tool");
      expect(viaGateway.stdout).toBe("ran: newcomer-tool\n");

      const stopped = await keel(["gateway", "stop"], { env });
      expect(stopped.code, stopped.stderr).toBe(0);
      expect(stopped.stdout).toContain(`Gateway stopped (pid ${pid})`);
      expect((await keel(["gateway", "status"], { env })).code).toBe(3);
    }, 180_000); // ten keel processes and a background gateway: generous on a loaded machine
  },
);
