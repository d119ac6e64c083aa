/** The glibc malloc settings Keel adds to the environment of the gateways it starts. */
import { describe, expect, it } from "vitest";
import { MALLOC_TUNABLES_VALUE, withMallocTunables } from "./malloc-tunables.js";

describe("withMallocTunables", () => {
  it("fixes glibc's trim threshold, keeping the rest of the environment", () => {
    const env = withMallocTunables({ PATH: "/usr/bin", KEEL_HOME: "/h" });
    expect(env).toEqual({
      PATH: "/usr/bin",
      KEEL_HOME: "/h",
      GLIBC_TUNABLES: "glibc.malloc.trim_threshold=131072",
    });
    expect(MALLOC_TUNABLES_VALUE).toBe(env.GLIBC_TUNABLES);
  });

  it("adds to the operator's tunables and never overrides one they set", () => {
    expect(withMallocTunables({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" }).GLIBC_TUNABLES).toBe(
      "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=131072",
    );
    const own = { GLIBC_TUNABLES: "glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=0" };
    expect(withMallocTunables(own)).toBe(own);
  });
});
