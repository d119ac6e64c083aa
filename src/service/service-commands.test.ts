import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type ServiceDeps, serviceUnitPath } from "./install.js";
import {
  type CommandIo,
  runInstallCommand,
  runServiceStatusCommand,
  runUninstallCommand,
} from "./service-commands.js";
import type { ServiceSpec } from "./service-spec.js";
import { renderSystemdUnit } from "./systemd.js";

let dir: string;
let calls: string[][];
let out: string[];
let err: string[];
const io: CommandIo = { out: (line) => out.push(line), err: (line) => err.push(line) };

function deps(platform: NodeJS.Platform = "linux"): ServiceDeps {
  return {
    platform,
    homeDir: join(dir, "user"),
    uid: 501,
    unitDir: join(dir, "units"),
    run: async (argv) => {
      calls.push([...argv]);
      return { code: 0, stdout: argv.includes("is-active") ? "active\n" : "enabled\n", stderr: "" };
    },
  };
}

function makeSpec(overrides: Partial<ServiceSpec> = {}): ServiceSpec {
  return {
    nodePath: "/usr/bin/node",
    keelEntry: "/opt/keel/bin/keel.js",
    home: join(dir, "keel"),
    env: {},
    drainTimeoutSeconds: 0,
    system: false,
    ...overrides,
  };
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "keel-cmd-"));
  calls = [];
  out = [];
  err = [];
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("runInstallCommand", () => {
  it("installs, says how to start it and exits 0", async () => {
    expect(await runInstallCommand({ spec: makeSpec() }, io, deps())).toBe(0);
    expect(out[0]).toBe(`Installed ${join(dir, "units", "keel-gateway.service")}.`);
    expect(out.join("\n")).toContain("systemctl --user start keel-gateway.service");
    expect(out.join("\n")).toContain("loginctl enable-linger");
    expect(err).toEqual([]);
  });

  it("--dry-run prints the unit and the commands and writes nothing", async () => {
    const spec = makeSpec();
    expect(await runInstallCommand({ spec, dryRun: true }, io, deps())).toBe(0);
    expect(out[0]).toBe(`Would write ${join(dir, "units", "keel-gateway.service")}:`);
    expect(out.slice(1, -3).join("\n")).toBe(renderSystemdUnit(spec).replace(/\n$/, ""));
    expect(out.slice(-3)).toEqual([
      "Would run:",
      "  systemctl --user daemon-reload",
      "  systemctl --user enable keel-gateway.service",
    ]);
    expect(calls).toEqual([]);
    await expect(readFile(serviceUnitPath(deps(), false), "utf8")).rejects.toThrow(/ENOENT/);
  });

  it("exits 1 with the --force hint when a different unit is installed, and 0 with --force", async () => {
    await mkdir(join(dir, "units"));
    await writeFile(join(dir, "units", "keel-gateway.service"), "[Service]\nTimeoutStopSec=30\n");
    expect(await runInstallCommand({ spec: makeSpec() }, io, deps())).toBe(1);
    expect(err[0]).toContain("keel gateway install --force");
    expect(await runInstallCommand({ spec: makeSpec(), force: true }, io, deps())).toBe(0);
    expect(out.join("\n")).toContain("Replaced");
    expect(out.join("\n")).toContain("keel gateway restart");
  });

  it("refuses a system unit without an account to run as (exit 2)", async () => {
    expect(await runInstallCommand({ spec: makeSpec({ system: true }) }, io, deps())).toBe(2);
    expect(err[0]).toMatch(/root/);
    expect(calls).toEqual([]);
  });

  it("names secrets left out of a system unit", async () => {
    const spec = makeSpec({ system: true, user: "keel" });
    expect(await runInstallCommand({ spec, skippedEnv: ["OPENAI_API_KEY"] }, io, deps())).toBe(0);
    expect(err).toEqual([
      "Not copied into the unit (readable by every local user): OPENAI_API_KEY. Put it in config.yaml instead.",
    ]);
    expect(out.join("\n")).not.toContain("--user");
  });

  it("reports usage errors (--system on macOS, unsupported platform) as exit 2", async () => {
    expect(
      await runInstallCommand(
        { spec: makeSpec({ system: true, user: "ada" }) },
        io,
        deps("darwin"),
      ),
    ).toBe(2);
    expect(await runInstallCommand({ spec: makeSpec() }, io, deps("win32"))).toBe(2);
    expect(err).toHaveLength(2);
  });

  it("tells a macOS user the agent is already running", async () => {
    expect(await runInstallCommand({ spec: makeSpec() }, io, deps("darwin"))).toBe(0);
    expect(out).toContain("The launchd agent is loaded: it runs now and at every login.");
  });
});

describe("runUninstallCommand", () => {
  it("removes an installed unit, and is fine when there is none", async () => {
    await runInstallCommand({ spec: makeSpec() }, io, deps());
    out = [];
    expect(await runUninstallCommand({ system: false }, io, deps())).toBe(0);
    expect(out[0]).toMatch(/^Stopped the service and removed /);
    expect(await runUninstallCommand({ system: false }, io, deps())).toBe(0);
    expect(out[1]).toMatch(/^No service installed at /);
  });

  it("--dry-run lists what it would run", async () => {
    await runInstallCommand({ spec: makeSpec() }, io, deps());
    out = [];
    calls = [];
    expect(await runUninstallCommand({ system: false, dryRun: true }, io, deps())).toBe(0);
    expect(out.slice(1)).toEqual([
      "  systemctl --user disable --now keel-gateway.service",
      "  systemctl --user daemon-reload",
    ]);
    expect(calls).toEqual([]);
  });
});

describe("runServiceStatusCommand", () => {
  it("prints the unit state and the stale-timeout warning", async () => {
    await runInstallCommand({ spec: makeSpec() }, io, deps());
    out = [];
    const spec = makeSpec({ drainTimeoutSeconds: 120 });
    expect(
      await runServiceStatusCommand({ system: false, drainTimeoutSeconds: 120, spec }, io, deps()),
    ).toBe(0);
    expect(out[0]).toContain("(enabled, active, differs from `keel gateway install --dry-run`)");
    expect(err[0]).toMatch(/^warning: installed unit's TimeoutStopSec=60 .*install --force/);
  });

  it("says how to install when nothing is installed", async () => {
    expect(
      await runServiceStatusCommand({ system: false, drainTimeoutSeconds: 0 }, io, deps()),
    ).toBe(0);
    expect(out).toEqual(["service: not installed (systemd; `keel gateway install` adds it)"]);
  });
});

describe("install is all or nothing", () => {
  /** A machine whose systemctl fails for the commands containing `failing`. */
  function failingDeps(failing: string, stderr: string): ServiceDeps {
    return {
      ...deps(),
      run: async (argv) => {
        calls.push([...argv]);
        if (argv.includes(failing)) return { code: 1, stdout: "", stderr };
        return { code: 0, stdout: "", stderr: "" };
      },
    };
  }
  const unit = () => join(dir, "units", "keel-gateway.service");
  const exists = () =>
    readFile(unit(), "utf8").then(
      (text) => text,
      () => null,
    );

  it("checks the user bus first and writes nothing without it", async () => {
    const machine = failingDeps("show-environment", "Failed to connect to bus: No medium found");
    expect(await runInstallCommand({ spec: makeSpec() }, io, machine)).toBe(1);
    expect(calls).toEqual([["systemctl", "--user", "show-environment"]]);
    expect(await exists()).toBeNull();
    expect(err.join("\n")).toMatch(/no user D-Bus \(Failed to connect to bus: No medium found\)/);
    expect(err.join("\n")).toContain("`keel gateway start`");
  });

  it("removes the unit again when registering it fails", async () => {
    const machine = failingDeps("enable", "Failed to enable unit");
    expect(await runInstallCommand({ spec: makeSpec() }, io, machine)).toBe(1);
    expect(await exists()).toBeNull();
    expect(calls.at(-1)).toEqual(["systemctl", "--user", "daemon-reload"]);
    expect(err.join("\n")).toMatch(
      /Install failed: .*enable.*; removed .*keel-gateway\.service again/,
    );
    expect(err.join("\n")).toContain("Nothing is installed. `keel gateway start`");
  });

  it("restores the previous unit when replacing it fails", async () => {
    await mkdir(join(dir, "units"), { recursive: true });
    await writeFile(unit(), "[Unit]\nDescription=the old one\n");
    const machine = failingDeps("enable", "Failed to enable unit");
    expect(await runInstallCommand({ spec: makeSpec(), force: true }, io, machine)).toBe(1);
    expect(await exists()).toBe("[Unit]\nDescription=the old one\n");
  });

  it("uninstall reports success when it removed the unit, even if the reload failed", async () => {
    expect(await runInstallCommand({ spec: makeSpec() }, io, deps())).toBe(0);
    out = [];
    err = [];
    const machine = failingDeps("daemon-reload", "Failed to connect to bus");
    expect(await runUninstallCommand({ system: false }, io, machine)).toBe(0);
    expect(await exists()).toBeNull();
    expect(out).toEqual([`Stopped the service and removed ${unit()}.`]);
    expect(err.join("\n")).toMatch(/^warning: .*daemon-reload/);
  });
});
