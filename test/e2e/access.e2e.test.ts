/**
 * Access as the operator meets it through the built command line: the exposure rule at start,
 * the login link printed at start and by `keel open`, the trust_loopback warning, and `keel chat`
 * holding operator rights through the control token.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  EXIT_RESTART,
  type GatewayProcess,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";
import { waitFor } from "../helpers/wait-for.js";

let fake: FakeOpenAI;
let home: string;
let gateway: GatewayProcess | undefined;

beforeEach(async () => {
  fake = await startFakeOpenAI();
  home = mkdtempSync(join(tmpdir(), "keel-e2e-access-"));
});

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
  await fake.close();
  rmSync(home, { recursive: true, force: true });
});

const modelEnv = () => ({ OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model" });

describe("access from the command line", () => {
  it("refuses to listen off loopback without http.public_hosts: exit 78 naming it", async () => {
    const result = await runKeel({
      home,
      args: ["gateway", "run"],
      env: {
        KEEL_HTTP_HOST: "0.0.0.0",
        KEEL_HTTP_PORT: "0",
        KEEL_API_KEY: "k".repeat(20),
        KEEL_CONTROL_TOKEN: "t".repeat(20),
      },
    });
    expect(result.code).toBe(78);
    expect(result.stderr).toMatch(/http\.public_hosts \(KEEL_HTTP_PUBLIC_HOSTS\)/);
  });

  it("refuses a home others may write to, planted control_token and all: exit 78 with the chmod", async () => {
    writeFileSync(join(home, "control_token"), `${"planted".repeat(4)}\n`, { mode: 0o600 });
    chmodSync(home, 0o777);
    const result = await runKeel({
      home,
      args: ["gateway", "run"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: "0" },
    });
    expect(result.code).toBe(78);
    expect(result.stderr).toContain(`Unsafe Keel home`);
    expect(result.stderr).toContain(`chmod 700 ${home}`);
    expect(result.stdout).not.toContain("planted");
    chmodSync(home, 0o700);
  });

  it("prints the login link at start (never into the log) and `keel open` prints the same one", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    const token = gateway.controlToken;
    const link = `http://127.0.0.1:${gateway.port}/?token=${token}`;
    await gateway.waitForOutput(link);
    const log = readFileSync(join(home, "logs", "gateway.log"), "utf8");
    expect(log).toMatch(/web login/);
    expect(log).not.toContain(token);

    const opened = await runKeel({
      home,
      args: ["open"],
      env: { KEEL_HTTP_PORT: String(gateway.port), DISPLAY: "", WAYLAND_DISPLAY: "" },
    });
    expect(opened.code).toBe(0);
    expect(opened.stdout.trim()).toBe(link);
    expect(opened.stderr).toMatch(/no browser/);

    const res = await fetch(link, { redirect: "manual" });
    expect(res.status).toBe(303);
    expect(res.headers.get("set-cookie")).toMatch(/^keel_session=/);
  });

  it("`keel open` hands the browser a private redirect file, never the token on a command line", async () => {
    const bin = mkdtempSync(join(tmpdir(), "keel-fake-opener-"));
    const record = join(bin, "argv");
    writeFileSync(join(bin, "xdg-open"), `#!/bin/sh\necho "$@" > "${record}"\n`);
    chmodSync(join(bin, "xdg-open"), 0o755);
    try {
      const result = await runKeel({
        home,
        args: ["open"],
        env: { DISPLAY: ":0", PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}` },
      });
      expect(result.code).toBe(0);
      const token = readFileSync(join(home, "control_token"), "utf8").trim();
      const argv = await waitFor(() => readFileSync(record, "utf8"), { message: "opener ran" });
      expect(argv).not.toContain(token);
      expect(argv.trim()).toBe(join(home, "login.html"));
      expect(readFileSync(join(home, "login.html"), "utf8")).toContain(`?token=${token}`);
      expect(statSync(join(home, "login.html")).mode & 0o777).toBe(0o600);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });

  it("warns at start when http.trust_loopback is on", async () => {
    gateway = await startGatewayProcess({
      home,
      env: { ...modelEnv(), KEEL_HTTP_TRUST_LOOPBACK: "true" },
    });
    await gateway.waitForReady();
    await gateway.waitForOutput(/http\.trust_loopback is on/);
    expect((await gateway.fetch("/api/status")).status).toBe(200);
  });

  it("`keel chat` uses the control token, so its /restart restarts the gateway", async () => {
    gateway = await startGatewayProcess({ home, env: modelEnv() });
    await gateway.waitForReady();
    const result = await runKeel({
      home,
      args: ["chat"],
      env: { ...modelEnv(), KEEL_HTTP_PORT: String(gateway.port) },
      input: "/restart\n",
    });
    expect(result.code).toBe(0);
    const exit = await gateway.waitForExit(20_000);
    // Under a container or service manager the supervisor starts the next one (75); otherwise a
    // detached successor does (0).
    expect([EXIT_RESTART, 0]).toContain(exit.code);
  });
});
