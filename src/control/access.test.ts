import { describe, expect, it } from "vitest";
import { AuthFailures, clientKey } from "./auth-failures.js";
import { acceptedHostNames, isAcceptedHost } from "./http-auth.js";
import { DEFAULT_SESSION_TTL_S, sessionCookieOf, WebSessions } from "./web-session.js";

describe("failed-authentication limiter", () => {
  it("holds each failure longer than the one before, up to the cap", () => {
    const failures = new AuthFailures({ now: () => 1_000_000 });
    const delays = Array.from({ length: 10 }, () => failures.recordFailure("a"));
    expect(delays).toEqual([0, 25, 50, 100, 200, 400, 800, 1000, 1000, 1000]);
    expect(failures.recordFailure("b")).toBe(0);
  });

  it("locks an address after more than 10 failures a minute, with the seconds until it frees", () => {
    let now = 1_000_000;
    const failures = new AuthFailures({ now: () => now });
    for (let i = 0; i < 10; i++) {
      failures.recordFailure("a");
      now += 1000;
    }
    expect(failures.lockedForSeconds("a")).toBe(0);
    failures.recordFailure("a");
    // The first failure (at 1_000_000) ages out at 1_060_000; now is 1_010_000.
    expect(failures.lockedForSeconds("a")).toBe(50);
    expect(failures.lockedForSeconds("b")).toBe(0);
    now = 1_060_001;
    expect(failures.lockedForSeconds("a")).toBe(0);
  });

  it("counts an IPv4-mapped address as its IPv4 address and IPv6 addresses per /64", () => {
    const failures = new AuthFailures({ now: () => 1_000_000 });
    for (let i = 0; i < 6; i++) failures.recordFailure("203.0.113.7");
    for (let i = 0; i < 5; i++) failures.recordFailure("::ffff:203.0.113.7");
    expect(failures.lockedForSeconds("203.0.113.7")).toBeGreaterThan(0);
    expect(failures.lockedForSeconds("::FFFF:203.0.113.7")).toBeGreaterThan(0);
    // Eleven addresses of one /64, written every way IPv6 allows.
    for (let i = 1; i <= 11; i++) failures.recordFailure(`2001:db8:0:7::${i.toString(16)}`);
    expect(failures.lockedForSeconds("2001:0DB8:0000:0007:ffff:1:2:3")).toBeGreaterThan(0);
    expect(failures.lockedForSeconds("2001:db8:0:8::1")).toBe(0);
    expect(failures.lockedForSeconds("203.0.113.8")).toBe(0);
  });

  it("derives the counted key from an address", () => {
    // Every loopback address is one client: a local process may bind any of 127.0.0.0/8.
    for (const loopback of ["127.0.0.1", "127.0.0.2", "127.1.2.3", "::ffff:127.9.9.9", "::1"]) {
      expect(clientKey(loopback)).toBe("loopback");
    }
    expect(clientKey("0:0:0:0:0:0:0:1")).toBe("loopback");
    expect(clientKey("128.0.0.1")).toBe("128.0.0.1");
    expect(clientKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(clientKey("::2")).toBe("0:0:0:0::/64");
    expect(clientKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(clientKey("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(clientKey("2001:db8:1:2:3:4:5:6")).toBe("2001:db8:1:2::/64");
    expect(clientKey("64:ff9b::192.0.2.1")).toBe("64:ff9b:0:0::/64");
    expect(clientKey("unknown")).toBe("unknown");
  });
});

describe("web session cookie", () => {
  it("is an HMAC of its issue time, valid only for the gateway with that token, for http.session_ttl", () => {
    let now = 1_700_000_000_000;
    const sessions = new WebSessions("token-of-gateway-one", () => now, 3600);
    const value = sessions.issue();
    expect(value).not.toContain("token-of-gateway-one");
    expect(sessions.verify(value)).toBe(true);
    expect(new WebSessions("token-of-gateway-two", () => now).verify(value)).toBe(false);
    expect(sessions.verify(`${value.slice(0, -1)}A`)).toBe(value.endsWith("A"));
    expect(sessions.verify("token-of-gateway-one")).toBe(false);
    now += 3600 * 1000;
    expect(sessions.verify(value)).toBe(true);
    now += 1000;
    expect(sessions.verify(value)).toBe(false);
  });

  it("lasts 12 hours unless http.session_ttl says otherwise, in the browser and at the gateway", () => {
    let now = 1_700_000_000_000;
    const sessions = new WebSessions("t".repeat(20), () => now);
    expect(sessions.setCookieHeader()).toContain(`Max-Age=${DEFAULT_SESSION_TTL_S};`);
    expect(DEFAULT_SESSION_TTL_S).toBe(43_200);
    const value = sessions.issue();
    now += (43_200 + 1) * 1000;
    expect(sessions.verify(value)).toBe(false);
    expect(new WebSessions("t".repeat(20), () => now, 600).setCookieHeader()).toContain(
      "Max-Age=600;",
    );
  });

  it("sets HttpOnly, SameSite=Strict and Path=/ and is read back from a Cookie header", () => {
    const header = new WebSessions("t".repeat(20)).setCookieHeader();
    expect(header).toMatch(/^keel_session=v1\.\d+\.[\w-]{43}; /);
    expect(header).toContain("HttpOnly");
    expect(header).toContain("SameSite=Strict");
    expect(header).toContain("Path=/");
    expect(sessionCookieOf("a=1; keel_session=v1.2.x ; b=3")).toBe("v1.2.x");
    expect(sessionCookieOf("keel_session_other=1")).toBeNull();
  });
});

describe("accepted Host names", () => {
  it("accepts exactly the loopback names with the bound port, the bind address and public names", () => {
    const names = acceptedHostNames({
      host: "127.0.0.1",
      port: 8642,
      publicHosts: ["keel.example.com"],
    });
    for (const ok of ["127.0.0.1:8642", "LOCALHOST:8642", "[::1]:8642", "keel.example.com"]) {
      expect(isAcceptedHost(ok, names), ok).toBe(true);
    }
    for (const bad of [
      "127.0.0.1",
      "127.0.0.1:8643",
      "127.0.0.2:8642",
      "127.evil.example:8642",
      "127.0.0.1.nip.io:8642",
      "localhost.evil:8642",
      "localhost.:8642",
      "keel.example.com:8642",
      "evil.example",
      "",
    ]) {
      expect(isAcceptedHost(bad, names), bad).toBe(false);
    }
    expect(isAcceptedHost(undefined, names)).toBe(false);
  });

  it("accepts a name without a port only on port 80", () => {
    const names = acceptedHostNames({ host: "0.0.0.0", port: 80, publicHosts: [] });
    expect(isAcceptedHost("localhost", names)).toBe(true);
    expect(isAcceptedHost("localhost:80", names)).toBe(true);
    expect(isAcceptedHost("0.0.0.0:80", names)).toBe(false);
  });
});
