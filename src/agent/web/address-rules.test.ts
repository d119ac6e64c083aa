import { describe, expect, it } from "vitest";
import { createAddressRules, guardedLookup, unmapped } from "./address-rules.js";

describe("address rules", () => {
  const rules = createAddressRules([]);

  it.each([
    ["127.0.0.1", "loopback"],
    ["127.8.9.10", "loopback"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["0.0.0.0", "unspecified"],
    ["10.0.0.1", "private"],
    ["172.16.5.4", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "CGNAT"],
    ["169.254.169.254", "link-local"],
    ["fd00:ec2::254", "unique local"],
    ["fc00::1", "private"],
    ["fe80::1", "link-local"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:a9fe:a9fe", "link-local"],
    ["::ffff:10.1.2.3", "private"],
    // Every spelling Node connects to the IPv4 address inside, and NAT64's prefix.
    ["0:0:0:0:0:ffff:7f00:1", "loopback"],
    ["0::ffff:a9fe:a9fe", "link-local"],
    ["::ffff:0:7f00:1", "loopback"],
    ["64:ff9b::169.254.169.254", "link-local"],
    ["fe80::1%eth0", "link-local"],
  ])("refuses %s (%s)", (address, kind) => {
    const why = rules.refusal(address, address);
    expect(why).toContain(kind);
    expect(why).toContain("tools.web.allow_hosts");
  });

  it.each([
    "93.184.216.34",
    "1.1.1.1",
    "172.32.0.1",
    "2606:4700:4700::1111",
    "::ffff:93.184.216.34",
  ])("lets public %s through", (address) => {
    expect(rules.refusal(address, address)).toBeNull();
  });

  it("exempts the hosts, addresses and CIDRs of allow_hosts, and nothing else", () => {
    const allowing = createAddressRules([
      "wiki.intranet",
      "10.0.0.0/8",
      "192.168.7.7",
      "fd12::/16",
    ]);
    expect(allowing.refusal("WIKI.intranet", "192.168.1.1")).toBeNull();
    expect(allowing.refusal("x", "10.200.3.4")).toBeNull();
    expect(allowing.refusal("x", "::ffff:10.200.3.4")).toBeNull();
    expect(allowing.refusal("x", "192.168.7.7")).toBeNull();
    expect(allowing.refusal("x", "fd12:3::1")).toBeNull();
    expect(allowing.refusal("x", "192.168.7.8")).toContain("private");
    expect(allowing.refusal("other.intranet", "127.0.0.1")).toContain("loopback");
  });

  it("reads an IPv4 address inside IPv6 in every spelling", () => {
    expect(unmapped("::ffff:7f00:1")).toBe("127.0.0.1");
    expect(unmapped("::FFFF:192.168.0.1")).toBe("192.168.0.1");
    expect(unmapped("0:0:0:0:0:FFFF:7f00:1")).toBe("127.0.0.1");
    expect(unmapped("64:ff9b::a9fe:a9fe")).toBe("169.254.169.254");
    expect(unmapped("2001:db8::1")).toBe("2001:db8::1");
  });

  it("refuses a name when any of its addresses is refused, and answers with the checked ones", async () => {
    const lookup = guardedLookup(rules, async (host) =>
      host === "mixed.test"
        ? [
            { address: "93.184.216.34", family: 4 },
            { address: "10.0.0.7", family: 4 },
          ]
        : [{ address: "93.184.216.34", family: 4 }],
    );
    const ask = (host: string, all: boolean) =>
      new Promise<unknown>((resolve, reject) =>
        lookup(host, { all }, (error, address) => (error ? reject(error) : resolve(address))),
      );
    await expect(ask("mixed.test", true)).rejects.toThrow(
      /mixed\.test \(10\.0\.0\.7\) is a private/,
    );
    await expect(ask("public.test", true)).resolves.toEqual([
      { address: "93.184.216.34", family: 4 },
    ]);
    await expect(ask("public.test", false)).resolves.toBe("93.184.216.34");
  });
});
