import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  checkInstalledServiceTimeout,
  checkInstalledUnitTimeout,
  installService,
  parseSystemdTimespan,
  type RunResult,
  runCommand,
  type ServiceDeps,
  serviceStatus,
  serviceUnitPath,
  uninstallService,
} from "./install.js";
import { renderLaunchdPlist } from "./launchd.js";
import type { ServiceSpec } from "./service-spec.js";
import { renderSystemdUnit } from "./systemd.js";

interface Recorder {
  calls: string[][];
  /** Result for the next calls whose argv contains the given word. */
  answers: Map<string, RunResult>;
}

function recordingDeps(dir: string, platform: NodeJS.Platform, recorder: Recorder): ServiceDeps {
  return {
    platform,
    homeDir: join(dir, "user-home"),
    uid: 501,
    unitDir: join(dir, "units"),
    run: async (argv) => {
      recorder.calls.push([...argv]);
      for (const [word, answer] of recorder.answers) if (argv.includes(word)) return answer;
      return { code: 0, stdout: "", stderr: "" };
    },
  };
}

let dir: string;
let recorder: Recorder;
let spec: ServiceSpec;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "keel-install-"));
  recorder = { calls: [], answers: new Map() };
  spec = {
    nodePath: "/usr/bin/node",
    keelEntry: "/opt/keel/bin/keel.js",
    home: join(dir, "keel home"),
    env: { PATH: "/usr/bin" },
    drainTimeoutSeconds: 0,
    system: false,
  };
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("serviceUnitPath", () => {
  it("uses the standard folders without an override", () => {
    const base = { homeDir: "/home/ada" };
    expect(serviceUnitPath({ ...base, platform: "linux" }, false)).toBe(
      "/home/ada/.config/systemd/user/keel-gateway.service",
    );
    expect(serviceUnitPath({ ...base, platform: "linux" }, true)).toBe(
      "/etc/systemd/system/keel-gateway.service",
    );
    expect(serviceUnitPath({ ...base, platform: "darwin" }, false)).toBe(
      "/home/ada/Library/LaunchAgents/ai.keel.gateway.plist",
    );
    expect(() => serviceUnitPath({ ...base, platform: "win32" }, false)).toThrow(/win32/);
  });
});

describe("installService on systemd", () => {
  it("writes the unit (mode 0600), reloads and enables it", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const result = await installService({ spec }, deps);
    expect(result.outcome).toBe("installed");
    expect(result.path).toBe(join(dir, "units", "keel-gateway.service"));
    expect(await readFile(result.path, "utf8")).toBe(renderSystemdUnit(spec));
    expect((await stat(result.path)).mode & 0o777).toBe(0o600);
    expect(recorder.calls).toEqual([
      ["systemctl", "--user", "daemon-reload"],
      ["systemctl", "--user", "enable", "keel-gateway.service"],
    ]);
  });

  it("uses the system manager for a system unit", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const result = await installService({ spec: { ...spec, system: true, user: "keel" } }, deps);
    expect(result.outcome).toBe("installed");
    expect(recorder.calls).toEqual([
      ["systemctl", "daemon-reload"],
      ["systemctl", "enable", "keel-gateway.service"],
    ]);
    expect(await readFile(result.path, "utf8")).toContain("User=keel");
  });

  it("dry run renders and lists commands without touching anything", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const result = await installService({ spec, dryRun: true }, deps);
    expect(result.outcome).toBe("dry-run");
    expect(result.text).toBe(renderSystemdUnit(spec));
    expect(result.commands).toEqual([
      ["systemctl", "--user", "daemon-reload"],
      ["systemctl", "--user", "enable", "keel-gateway.service"],
    ]);
    expect(recorder.calls).toEqual([]);
    await expect(stat(join(dir, "units"))).rejects.toThrow(/ENOENT/);
  });

  it("leaves an identical unit alone", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    await installService({ spec }, deps);
    recorder.calls.length = 0;
    const again = await installService({ spec }, deps);
    expect(again.outcome).toBe("unchanged");
    expect(recorder.calls).toEqual([]);
  });

  it("keeps a differing unit unless forced, then replaces it", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const path = serviceUnitPath(deps, false);
    await mkdir(join(dir, "units"), { recursive: true });
    await writeFile(path, "[Service]\nTimeoutStopSec=30\n");
    const refused = await installService({ spec: { ...spec, drainTimeoutSeconds: 60 } }, deps);
    expect(refused.outcome).toBe("differs");
    expect(await readFile(path, "utf8")).toBe("[Service]\nTimeoutStopSec=30\n");
    expect(recorder.calls).toEqual([]);
    const forced = await installService(
      { spec: { ...spec, drainTimeoutSeconds: 60 }, force: true },
      deps,
    );
    expect(forced.outcome).toBe("replaced");
    expect(await readFile(path, "utf8")).toContain("TimeoutStopSec=90");
    expect(recorder.calls).toHaveLength(2);
  });

  it("reports a failing systemctl with its output", async () => {
    recorder.answers.set("enable", { code: 1, stdout: "", stderr: "Failed to connect to bus" });
    const result = await installService({ spec }, recordingDeps(dir, "linux", recorder));
    expect(result.outcome).toBe("failed");
    expect(result.error).toContain("systemctl --user enable keel-gateway.service");
    expect(result.error).toContain("Failed to connect to bus");
  });

  it("reports an unwritable unit folder as a failure instead of throwing", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    await writeFile(join(dir, "units"), "a file where the folder should be");
    const result = await installService({ spec }, deps);
    expect(result.outcome).toBe("failed");
    expect(result.error).toMatch(/could not write/);
    expect(recorder.calls).toEqual([]);
  });
});

describe("installService on launchd", () => {
  it("writes the plist, creates the log folder and bootstraps the agent", async () => {
    recorder.answers.set("bootout", { code: 3, stdout: "", stderr: "No such process" });
    const deps = recordingDeps(dir, "darwin", recorder);
    const result = await installService({ spec }, deps);
    expect(result.outcome).toBe("installed");
    expect(result.path).toBe(join(dir, "units", "ai.keel.gateway.plist"));
    expect(await readFile(result.path, "utf8")).toBe(renderLaunchdPlist(spec));
    expect((await stat(join(spec.home, "logs"))).isDirectory()).toBe(true);
    expect(recorder.calls).toEqual([
      ["launchctl", "bootout", "gui/501/ai.keel.gateway"],
      ["launchctl", "bootstrap", "gui/501", result.path],
    ]);
  });

  it("refuses --system", async () => {
    const deps = recordingDeps(dir, "darwin", recorder);
    await expect(
      installService({ spec: { ...spec, system: true, user: "ada" } }, deps),
    ).rejects.toThrow(/systemd/);
  });
});

describe("uninstallService", () => {
  it("disables, removes and reloads a systemd unit", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const installed = await installService({ spec }, deps);
    recorder.calls.length = 0;
    const result = await uninstallService({ system: false }, deps);
    expect(result.outcome).toBe("removed");
    await expect(stat(installed.path)).rejects.toThrow(/ENOENT/);
    expect(recorder.calls).toEqual([
      ["systemctl", "--user", "disable", "--now", "keel-gateway.service"],
      ["systemctl", "--user", "daemon-reload"],
    ]);
  });

  it("boots out and removes a launchd agent even if it was not loaded", async () => {
    const deps = recordingDeps(dir, "darwin", recorder);
    const installed = await installService({ spec }, deps);
    recorder.calls.length = 0;
    recorder.answers.set("bootout", { code: 113, stdout: "", stderr: "Could not find service" });
    const result = await uninstallService({ system: false }, deps);
    expect(result.outcome).toBe("removed");
    await expect(stat(installed.path)).rejects.toThrow(/ENOENT/);
    expect(recorder.calls).toEqual([["launchctl", "bootout", "gui/501/ai.keel.gateway"]]);
  });

  it("says not-installed and runs nothing when there is no unit", async () => {
    const result = await uninstallService({ system: false }, recordingDeps(dir, "linux", recorder));
    expect(result.outcome).toBe("not-installed");
    expect(recorder.calls).toEqual([]);
  });

  it("dry run lists the commands and keeps the file", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    const installed = await installService({ spec }, deps);
    recorder.calls.length = 0;
    const result = await uninstallService({ system: false, dryRun: true }, deps);
    expect(result.outcome).toBe("dry-run");
    expect(result.commands).toHaveLength(2);
    expect(recorder.calls).toEqual([]);
    expect((await stat(installed.path)).isFile()).toBe(true);
  });
});

describe("serviceStatus", () => {
  it("reports an absent unit without running anything", async () => {
    const status = await serviceStatus(
      { system: false, drainTimeoutSeconds: 0 },
      recordingDeps(dir, "linux", recorder),
    );
    expect(status).toMatchObject({ kind: "systemd", installed: false, state: null, warning: null });
    expect(recorder.calls).toEqual([]);
  });

  it("reports state, enablement, freshness and a stale timeout for systemd", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    await installService({ spec }, deps);
    recorder.answers.set("is-active", { code: 0, stdout: "active\n", stderr: "" });
    recorder.answers.set("is-enabled", { code: 0, stdout: "enabled\n", stderr: "" });
    const status = await serviceStatus(
      { system: false, drainTimeoutSeconds: 120, spec: { ...spec, drainTimeoutSeconds: 120 } },
      deps,
    );
    expect(status).toMatchObject({
      installed: true,
      state: "active",
      enabled: "enabled",
      upToDate: false,
    });
    expect(status.warning).toContain("TimeoutStopSec=60");
  });

  it("reads the launchd job state from launchctl print", async () => {
    const deps = recordingDeps(dir, "darwin", recorder);
    await installService({ spec }, deps);
    recorder.answers.set("print", {
      code: 0,
      stdout: "gui/501/ai.keel.gateway = {\n\tstate = running\n}",
      stderr: "",
    });
    const status = await serviceStatus({ system: false, drainTimeoutSeconds: 0, spec }, deps);
    expect(status).toMatchObject({
      kind: "launchd",
      state: "running",
      enabled: "loaded",
      upToDate: true,
      warning: null,
    });
  });
});

describe("checkInstalledUnitTimeout", () => {
  it("warns with the fix when the unit's stop timeout is shorter than drain + 30 s", () => {
    const warning = checkInstalledUnitTimeout({
      unitText: "[Service]\nTimeoutStopSec=30\n",
      drainTimeoutSeconds: 60,
    });
    expect(warning).toBe(
      "installed unit's TimeoutStopSec=30 is shorter than restart_drain_timeout (60s) + 30s, so the " +
        "supervisor would kill the gateway mid-drain; run `keel gateway install --force` to regenerate it",
    );
  });

  it("accepts a unit rendered for the same drain, and one with room to spare", () => {
    for (const drain of [0, 45, 600]) {
      const unitText = renderSystemdUnit({
        nodePath: "/n",
        keelEntry: "/k",
        home: "/h",
        env: {},
        drainTimeoutSeconds: drain,
        system: false,
      });
      expect(checkInstalledUnitTimeout({ unitText, drainTimeoutSeconds: drain })).toBeNull();
    }
    expect(
      checkInstalledUnitTimeout({
        unitText: "TimeoutStopSec=infinity\n",
        drainTimeoutSeconds: 9999,
      }),
    ).toBeNull();
  });

  it("applies systemd's 90 s default when no timeout is set, and understands time spans", () => {
    expect(
      checkInstalledUnitTimeout({ unitText: "[Service]\nType=simple\n", drainTimeoutSeconds: 60 }),
    ).toBeNull();
    expect(
      checkInstalledUnitTimeout({ unitText: "[Service]\n", drainTimeoutSeconds: 61 }),
    ).toContain("90 (default)");
    expect(
      checkInstalledUnitTimeout({ unitText: "TimeoutStopSec=1min 30s\n", drainTimeoutSeconds: 61 }),
    ).toContain("TimeoutStopSec=1min 30s");
    expect(
      checkInstalledUnitTimeout({ unitText: "TimeoutSec=2min\n", drainTimeoutSeconds: 90 }),
    ).toBeNull();
  });

  it("lets the last setting win, as systemd does", () => {
    const unitText = "TimeoutStopSec=300\nTimeoutSec=10\n";
    expect(checkInstalledUnitTimeout({ unitText, drainTimeoutSeconds: 0 })).toContain(
      "TimeoutStopSec=10",
    );
  });

  it("checks a launchd plist's ExitTimeOut, defaulting to 20 s and treating 0 as no limit", () => {
    const plist = (timeout: number) =>
      renderLaunchdPlist({
        nodePath: "/n",
        keelEntry: "/k",
        home: "/h",
        env: {},
        drainTimeoutSeconds: timeout,
        system: false,
      });
    expect(checkInstalledUnitTimeout({ unitText: plist(0), drainTimeoutSeconds: 45 })).toContain(
      "ExitTimeOut=60",
    );
    expect(checkInstalledUnitTimeout({ unitText: plist(45), drainTimeoutSeconds: 45 })).toBeNull();
    const noTimeout = plist(0).replace(/\s*<key>ExitTimeOut<\/key>\s*<integer>60<\/integer>/, "");
    expect(checkInstalledUnitTimeout({ unitText: noTimeout, drainTimeoutSeconds: 0 })).toContain(
      "ExitTimeOut=20",
    );
    const unlimited = plist(0).replace("<integer>60</integer>", "<integer>0</integer>");
    expect(
      checkInstalledUnitTimeout({ unitText: unlimited, drainTimeoutSeconds: 9999 }),
    ).toBeNull();
  });
});

describe("checkInstalledServiceTimeout", () => {
  it("finds the installed unit and reports it stale for a longer drain", async () => {
    const deps = recordingDeps(dir, "linux", recorder);
    expect(await checkInstalledServiceTimeout({ drainTimeoutSeconds: 300 }, deps)).toBeNull();
    await installService({ spec }, deps);
    expect(await checkInstalledServiceTimeout({ drainTimeoutSeconds: 0 }, deps)).toBeNull();
    expect(await checkInstalledServiceTimeout({ drainTimeoutSeconds: 300 }, deps)).toContain(
      "TimeoutStopSec=60",
    );
  });
});

describe("parseSystemdTimespan", () => {
  it.each<[string, number | null]>([
    ["90", 90],
    ["90s", 90],
    ["1min 30s", 90],
    ["5min", 300],
    ["1h", 3600],
    ["500ms", 0.5],
    ["infinity", Number.POSITIVE_INFINITY],
    ["abc", null],
    ["5 parsecs", null],
    ["5min junk!", null],
  ])("%s -> %s", (text, seconds) => {
    expect(parseSystemdTimespan(text)).toBe(seconds);
  });
});

describe("runCommand", () => {
  it("returns exit code and output without throwing", async () => {
    expect(await runCommand(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])).toEqual({
      code: 3,
      stdout: "out\n",
      stderr: "err\n",
    });
    expect((await runCommand(["/definitely/not/here"])).code).toBe(127);
    expect((await runCommand(["/bin/sh", "-c", "printf ok"])).stdout).toBe("ok");
  });
});
