import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { renderLaunchdPlist } from "../service/launchd.js";
import type { ServiceSpec } from "../service/service-spec.js";
import { renderSystemdUnit } from "../service/systemd.js";
import {
  findServiceTarget,
  launchctlKickstart,
  systemctlCommand,
  unitServesHome,
} from "./service-target.js";

function spec(home: string): ServiceSpec {
  return {
    nodePath: "/usr/bin/node",
    keelEntry: "/opt/keel/bin/keel.js",
    home,
    env: { PATH: "/usr/bin" },
    drainTimeoutSeconds: 0,
    system: false,
  };
}

describe("unitServesHome", () => {
  it("matches the home of a rendered systemd unit, quoted or not, and nothing else", () => {
    const plain = renderSystemdUnit(spec("/home/ann/.keel"));
    expect(unitServesHome("systemd", plain, "/home/ann/.keel")).toBe(true);
    expect(unitServesHome("systemd", plain, "/home/ann/.kee")).toBe(false);
    expect(unitServesHome("systemd", plain, "/home/ann/.keel/other")).toBe(false);
    const spaced = renderSystemdUnit(spec("/home/ann/my keel"));
    expect(unitServesHome("systemd", spaced, "/home/ann/my keel")).toBe(true);
    expect(unitServesHome("systemd", spaced, "/home/ann/my")).toBe(false);
  });

  it("matches the home of a rendered launchd plist, with XML escaping", () => {
    const plist = renderLaunchdPlist(spec("/Users/ann/keel & co"));
    expect(unitServesHome("launchd", plist, "/Users/ann/keel & co")).toBe(true);
    expect(unitServesHome("launchd", plist, "/Users/ann/keel")).toBe(false);
  });
});

describe("findServiceTarget", () => {
  let dir: ReturnType<typeof createTempDir>;
  beforeEach(() => {
    dir = createTempDir();
  });
  afterEach(() => dir.cleanup());

  it("finds the user unit installed for this home only", async () => {
    const unitDir = join(dir.path, ".config", "systemd", "user");
    mkdirSync(unitDir, { recursive: true });
    writeFileSync(join(unitDir, "keel-gateway.service"), renderSystemdUnit(spec("/srv/a")));
    const deps = { platform: "linux" as const, homeDir: dir.path };
    expect(await findServiceTarget("/srv/a", deps)).toEqual({
      kind: "systemd",
      system: false,
      path: join(unitDir, "keel-gateway.service"),
    });
    expect(await findServiceTarget("/srv/b", deps)).toBeNull();
  });

  it("is null when nothing is installed or the platform has no service manager", async () => {
    expect(await findServiceTarget("/srv/a", { platform: "linux", homeDir: dir.path })).toBeNull();
    expect(await findServiceTarget("/srv/a", { platform: "win32", homeDir: dir.path })).toBeNull();
  });
});

describe("service manager commands", () => {
  it("never block inside systemctl, and address user or system units", () => {
    const user = { kind: "systemd" as const, system: false, path: "/x" };
    expect(systemctlCommand(user, "stop")).toEqual([
      "systemctl",
      "--user",
      "stop",
      "--no-block",
      "keel-gateway.service",
    ]);
    expect(systemctlCommand({ ...user, system: true }, "is-active")).toEqual([
      "systemctl",
      "is-active",
      "keel-gateway.service",
    ]);
    expect(launchctlKickstart(501)).toEqual(["launchctl", "kickstart", "gui/501/ai.keel.gateway"]);
  });
});
