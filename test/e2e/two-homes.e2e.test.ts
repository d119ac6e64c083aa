/**
 * Two Keel homes configured with the same port: commands aimed at one home never take the other
 * home's gateway for theirs. Home A's gateway runs on the port; home B's commands find B's
 * gateway through B's pid file and check that the gateway answering at the address is that
 * process. Both homes share one control token here (as two homes under one exported
 * KEEL_CONTROL_TOKEN would), so A's gateway would even accept B's credential.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import {
  type GatewayProcess,
  readGatewayPid,
  runKeel,
  startGatewayProcess,
} from "../helpers/gateway-process.js";

let fake: FakeOpenAI;
let root: string;
let homeA: string;
let homeB: string;
let gatewayA: GatewayProcess | undefined;
let gatewayB: GatewayProcess | undefined;
const token = "shared-control-token-0123456789";

beforeEach(async () => {
  fake = await startFakeOpenAI();
  root = mkdtempSync(join(tmpdir(), "keel-e2e-homes-"));
  homeA = join(root, "a");
  homeB = join(root, "b");
  gatewayA = await startGatewayProcess({ home: homeA, env: env() });
  await gatewayA.waitForReady();
});

afterEach(async () => {
  await gatewayA?.stop();
  await gatewayB?.stop();
  gatewayA = gatewayB = undefined;
  // A `keel gateway start` that wrongly succeeded would have left B's gateway running.
  const strayB = readGatewayPid(homeB)?.pid;
  if (strayB) {
    try {
      process.kill(strayB, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  await fake.close();
  rmSync(root, { recursive: true, force: true });
});

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    OPENAI_BASE_URL: fake.baseUrl,
    KEEL_MODEL: "fake-model",
    KEEL_CONTROL_TOKEN: token,
    HOME: root,
    ...extra,
  };
}

/** `keel --home B ...` with B configured on A's port. */
function keelB(args: string[], input?: string) {
  const port = String(gatewayA!.port);
  return runKeel({
    home: homeB,
    args,
    env: env({ KEEL_HTTP_PORT: port }),
    ...(input !== undefined && { input }),
  });
}

// Several keel processes per test: generous under a loaded machine.
describe("two homes on one port", { timeout: 90_000 }, () => {
  it("B's status, doctor, stop and start never take A's gateway for B's", async () => {
    const status = await keelB(["gateway", "status", "--json"]);
    expect(status.code).toBe(3);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: false, pid: null });

    const doctor = await keelB(["doctor"]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/✗ gateway: not running, and 127\.0\.0\.1:\d+ is taken/);

    const stop = await keelB(["gateway", "stop"]);
    expect(stop.code).toBe(0);
    expect(stop.stdout).toContain("Gateway is not running.");

    const start = await keelB(["gateway", "start", "--timeout", "20"]);
    expect(start.code).toBe(1);
    expect(start.stdout).not.toMatch(/Gateway started/);
    expect(start.stderr).toMatch(/is taken by another program/);

    // A was never touched.
    expect(gatewayA!.exitStatus).toBeNull();
    expect((await gatewayA!.fetch("/readyz")).status).toBe(200);
  });

  it("B's chat talks to a gateway of its own and stores the session in B", async () => {
    const chat = await keelB(["chat"], "echo: from b\n");
    expect(chat.code, chat.stderr).toBe(0);
    expect(chat.stdout).toBe("from b\n");
    expect(chat.stderr).toMatch(/no gateway running/);
    const id = /\(session (\S+):/.exec(chat.stderr)?.[1];
    expect(id).toBeDefined();
    expect((await runKeel({ home: homeB, args: ["sessions", "show", id!] })).code).toBe(0);
    expect((await gatewayA!.control(`/api/sessions/${id}`)).status).toBe(404);
  });

  it("with B's gateway running elsewhere, B's chat and doctor refuse A's at B's address", async () => {
    gatewayB = await startGatewayProcess({ home: homeB, env: env() });
    await gatewayB.waitForReady();
    // B's commands now look at A's port (a changed http.port, say): the pid file's gateway is
    // alive, but the gateway answering there is another process.
    const chat = await keelB(["chat"], "echo: lost\n");
    expect(chat.code).toBe(1);
    expect(chat.stderr).toContain(`this home's gateway (pid ${gatewayB.pid}) is not the one`);
    expect(chat.stderr).toContain(`a gateway with pid ${gatewayA!.pid}`);
    expect(fake.requests).toHaveLength(0);

    const doctor = await keelB(["doctor"]);
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/✗ gateway: this home's gateway \(pid \d+\) is not the one/);

    // B's status is B's gateway, read from B's files, never A's answer.
    const status = await keelB(["gateway", "status", "--json"]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: true, pid: gatewayB.pid });
    expect(JSON.parse(status.stdout).source).toBe("files");

    // B's login link would not log in there: open says so.
    const open = await keelB(["open", "--no-browser"]);
    expect(open.code).toBe(0);
    expect(open.stderr).toContain(`this home's gateway (pid ${gatewayB.pid}) is not the one`);
  });
});
