import { describe, expect, it } from "vitest";
import { detectServiceManager, restartExitCode, type ServiceManager } from "./detect.js";

const none = () => false;
const only =
  (...paths: string[]) =>
  (path: string) =>
    paths.includes(path);

describe("detectServiceManager", () => {
  it("finds systemd by INVOCATION_ID", () => {
    expect(detectServiceManager({ env: { INVOCATION_ID: "abc123" }, exists: none })).toBe(
      "systemd",
    );
  });

  it("finds launchd by XPC_SERVICE_NAME unless it is empty or 0", () => {
    expect(
      detectServiceManager({ env: { XPC_SERVICE_NAME: "ai.keel.gateway" }, exists: none }),
    ).toBe("launchd");
    expect(detectServiceManager({ env: { XPC_SERVICE_NAME: "0" }, exists: none })).toBeNull();
    expect(detectServiceManager({ env: { XPC_SERVICE_NAME: "" }, exists: none })).toBeNull();
  });

  it("finds a container by /.dockerenv or /run/.containerenv", () => {
    expect(detectServiceManager({ env: {}, exists: only("/.dockerenv") })).toBe("container");
    expect(detectServiceManager({ env: {}, exists: only("/run/.containerenv") })).toBe("container");
  });

  it("returns null for a plain shell", () => {
    expect(
      detectServiceManager({ env: { PATH: "/usr/bin", INVOCATION_ID: "" }, exists: none }),
    ).toBeNull();
  });

  it("prefers systemd, then launchd, over a container marker", () => {
    const all = only("/.dockerenv", "/run/.containerenv");
    expect(
      detectServiceManager({ env: { INVOCATION_ID: "x", XPC_SERVICE_NAME: "y" }, exists: all }),
    ).toBe("systemd");
    expect(detectServiceManager({ env: { XPC_SERVICE_NAME: "y" }, exists: all })).toBe("launchd");
  });

  it("treats a failing probe as no container", () => {
    const throwing = () => {
      throw new Error("EACCES");
    };
    expect(detectServiceManager({ env: {}, exists: throwing })).toBeNull();
  });
});

describe("restartExitCode", () => {
  it.each<[ServiceManager | null, number]>([
    [null, 0],
    ["systemd", 0],
    ["launchd", 75],
    ["container", 75],
  ])("under %s a restart exits %i", (manager, code) => {
    expect(restartExitCode(manager)).toBe(code);
  });
});
