import { describe, expect, it } from "vitest";
import { detectSupervisor, exitCodeFor } from "./exit-code.js";

describe("supervisor detection", () => {
  const none = () => false;
  it("detects systemd, launchd and containers", () => {
    expect(detectSupervisor({ INVOCATION_ID: "abc" }, none)).toBe("systemd");
    expect(detectSupervisor({ XPC_SERVICE_NAME: "ai.keel.gateway" }, none)).toBe("launchd");
    expect(detectSupervisor({ XPC_SERVICE_NAME: "0" }, none)).toBeNull();
    expect(detectSupervisor({}, (path) => path === "/.dockerenv")).toBe("container");
    expect(detectSupervisor({}, (path) => path === "/run/.containerenv")).toBe("container");
    expect(detectSupervisor({}, none)).toBeNull();
  });

  it("prefers systemd, then launchd, over a container marker, and ignores empty values", () => {
    const all = () => true;
    expect(detectSupervisor({ INVOCATION_ID: "x", XPC_SERVICE_NAME: "y" }, all)).toBe("systemd");
    expect(detectSupervisor({ XPC_SERVICE_NAME: "y" }, all)).toBe("launchd");
    expect(detectSupervisor({ INVOCATION_ID: "", XPC_SERVICE_NAME: "" }, none)).toBeNull();
  });

  it("treats a failing file probe as no container", () => {
    const throwing = () => {
      throw new Error("EACCES");
    };
    expect(detectSupervisor({}, throwing)).toBeNull();
  });

  it("maps outcomes to the documented exit codes", () => {
    expect(exitCodeFor({ kind: "planned_stop" })).toBe(0);
    expect(exitCodeFor({ kind: "unexpected_signal" })).toBe(1);
    expect(exitCodeFor({ kind: "start_failure" })).toBe(1);
    expect(exitCodeFor({ kind: "config_error" })).toBe(78);
    expect(exitCodeFor({ kind: "restart", supervisor: null })).toBe(0);
    expect(exitCodeFor({ kind: "restart", supervisor: "systemd" })).toBe(0);
    expect(exitCodeFor({ kind: "restart", supervisor: "launchd" })).toBe(75);
    expect(exitCodeFor({ kind: "restart", supervisor: "container" })).toBe(75);
  });
});
