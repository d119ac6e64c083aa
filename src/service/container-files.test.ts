import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { MALLOC_TUNABLES_VALUE } from "../lib/malloc-tunables.js";
import { stopTimeoutFromDrain } from "./service-spec.js";

const dockerfile = readFileSync(new URL("../../Dockerfile", import.meta.url), "utf8");
const compose = parse(readFileSync(new URL("../../compose.yaml", import.meta.url), "utf8")) as {
  services: { keel: Record<string, unknown> };
  volumes: Record<string, unknown>;
};

/** Dockerfile instructions of the final stage, continuation lines joined. */
function finalStage(): string[] {
  const logical = dockerfile
    .replace(/\\\n\s*/g, " ")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"));
  const lastFrom = logical.map((l) => l.startsWith("FROM ")).lastIndexOf(true);
  return logical.slice(lastFrom);
}

function instruction(name: string): string[] {
  return finalStage()
    .filter((line) => line.startsWith(`${name} `))
    .map((line) => line.slice(name.length + 1).trim());
}

describe("compose.yaml", () => {
  const keel = compose.services.keel;
  const env = keel.environment as string[];

  it("derives stop_grace_period from the drain timeout by the one rule", () => {
    const drainEntry = env.find((e) => e.startsWith("KEEL_RESTART_DRAIN_TIMEOUT="));
    expect(drainEntry).toBeDefined();
    const drain = Number(drainEntry?.split("=")[1]);
    expect(keel.stop_grace_period).toBe(`${stopTimeoutFromDrain(drain)}s`);
  });

  it("restarts unless stopped, keeps /data on a named volume and stops with SIGTERM", () => {
    expect(keel.restart).toBe("unless-stopped");
    expect(keel.stop_signal).toBe("SIGTERM");
    expect(keel.volumes).toEqual(["keel-data:/data"]);
    expect(compose.volumes).toHaveProperty("keel-data");
  });

  it("insists on the API key and control token the non-loopback listener needs", () => {
    // Compose's `${NAME:?message}` makes `docker compose up` fail when NAME is unset.
    const required = (name: string) => env.some((e) => e.startsWith(`${name}=$\{${name}:?`));
    expect(required("KEEL_API_KEY")).toBe(true);
    expect(required("KEEL_CONTROL_TOKEN")).toBe(true);
  });
});

describe("Dockerfile", () => {
  it("builds on the current Node LTS (node:24-bookworm-slim) with the native toolchain only in the build stage", () => {
    expect(dockerfile).toMatch(/^FROM node:24-bookworm-slim AS build$/m);
    expect(instruction("FROM")).toEqual(["node:24-bookworm-slim"]);
    expect(dockerfile).toMatch(/apt-get install -y --no-install-recommends python3 make g\+\+/);
    expect(finalStage().join("\n")).not.toMatch(/g\+\+|python3/);
    expect(dockerfile).toContain("npm ci");
    expect(dockerfile).toContain("npm run build");
  });

  it("runs as a non-root user under tini with SIGTERM, KEEL_HOME=/data on a volume, listening on 0.0.0.0", () => {
    expect(instruction("USER")).toEqual(["node"]);
    expect(instruction("ENTRYPOINT")).toEqual(['["/usr/bin/tini", "--"]']);
    expect(instruction("CMD")).toEqual(['["node", "/app/bin/keel.js", "gateway", "run"]']);
    expect(instruction("STOPSIGNAL")).toEqual(["SIGTERM"]);
    expect(instruction("VOLUME")).toEqual(['["/data"]']);
    const envLine = instruction("ENV").join(" ");
    expect(envLine).toContain("KEEL_HOME=/data");
    expect(envLine).toContain("KEEL_HTTP_HOST=0.0.0.0");
    // Required off loopback (exit 78 otherwise): the names of the published loopback port.
    expect(envLine).toContain("KEEL_HTTP_PUBLIC_HOSTS=127.0.0.1:8642,localhost:8642");
    // The image's gateway gets the malloc settings of every gateway Keel starts itself.
    expect(envLine).toContain(`GLIBC_TUNABLES=${MALLOC_TUNABLES_VALUE}`);
  });
});

describe("Dockerfile HEALTHCHECK", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  const [healthcheck] = instruction("HEALTHCHECK");
  const argv = JSON.parse(healthcheck?.slice(healthcheck.indexOf("CMD ") + 4) ?? "[]") as string[];

  /** Runs the image's health probe against a port; resolves with its exit code. */
  function probe(port: number): Promise<number> {
    const [command, ...args] = argv;
    expect(command).toBe("node");
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        args,
        { env: { KEEL_HTTP_PORT: String(port) }, timeout: 20_000 },
        (err) => resolve(err ? Number(err.code ?? 1) : 0),
      );
    });
  }

  async function serve(status: number): Promise<{ port: number; paths: string[] }> {
    const paths: string[] = [];
    server = createServer((req, res) => {
      paths.push(req.url ?? "");
      res.writeHead(status).end();
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    return { port: (server.address() as AddressInfo).port, paths };
  }

  it("uses node's fetch, not curl", () => {
    expect(healthcheck).not.toMatch(/curl|wget/);
  });

  it("passes when /readyz answers 200", async () => {
    const { port, paths } = await serve(200);
    expect(await probe(port)).toBe(0);
    expect(paths).toEqual(["/readyz"]);
  });

  it("fails when /readyz answers 503 (starting, draining, stopping)", async () => {
    const { port } = await serve(503);
    expect(await probe(port)).toBe(1);
  });

  it("fails when nothing listens", async () => {
    const { port } = await serve(200);
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    server = undefined;
    expect(await probe(port)).toBe(1);
  });
});
