/**
 * Which network addresses the web tools may reach. A model told to fetch
 * `http://169.254.169.254/…` or `http://127.0.0.1:8642/…` must not become a way into the
 * machine's own network, so loopback, private, link-local, multicast, reserved and metadata
 * addresses are refused unless the operator lists the host or a CIDR in `tools.web.allow_hosts`.
 *
 * The check runs inside the connection's DNS lookup (see {@link guardedLookup}): Node connects to
 * the address the lookup returns, so the address checked is the address connected to, and a name
 * that resolves to a public address once and a private one the next time gains nothing.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP, type LookupFunction } from "node:net";

/** Ranges no fetch may reach by default. An IPv6 address carrying an IPv4 one is checked as IPv4 (unmapped). */
const REFUSED_V4: readonly [string, number, string][] = [
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "shared (CGNAT)"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local (cloud metadata)"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "IETF protocol assignments"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved or broadcast"],
];
const REFUSED_V6: readonly [string, number, string][] = [
  ["::1", 128, "loopback"],
  ["::", 128, "unspecified"],
  ["::", 96, "IPv4-compatible (deprecated)"],
  ["fc00::", 7, "private (unique local, e.g. fd00:ec2::254 metadata)"],
  ["fe80::", 10, "link-local"],
  ["fec0::", 10, "site-local"],
  ["ff00::", 8, "multicast"],
];

export interface AddressRules {
  /** Null when `address` (an IP literal) may be reached for `host`; else why not. */
  refusal(host: string, address: string): string | null;
}

/** Compiles `tools.web.allow_hosts` (host names, addresses, CIDRs; validated by the config). */
export function createAddressRules(allowHosts: readonly string[]): AddressRules {
  const allowedNames = new Set<string>();
  const allowedRanges = new BlockList();
  for (const entry of allowHosts) {
    const [address, prefix] = entry.split("/");
    const family = isIP(address ?? "");
    if (family === 0) {
      allowedNames.add(entry.toLowerCase());
    } else if (prefix === undefined) {
      allowedRanges.addAddress(address!, family === 4 ? "ipv4" : "ipv6");
    } else {
      allowedRanges.addSubnet(address!, Number(prefix), family === 4 ? "ipv4" : "ipv6");
    }
  }
  return {
    refusal(host, address) {
      if (allowedNames.has(bareHost(host).toLowerCase())) return null;
      const plain = unmapped(address);
      const family = isIP(plain) === 4 ? "ipv4" : "ipv6";
      if (allowedRanges.check(plain, family)) return null;
      const kind = refusedKind(plain);
      if (!kind) return null;
      const shown = plain === bareHost(host) ? plain : `${bareHost(host)} (${plain})`;
      return `${shown} is a ${kind} address; web tools reach only public addresses unless tools.web.allow_hosts lists it`;
    },
  };
}

const refusedV4 = REFUSED_V4.map(([net, prefix, kind]) => ({
  list: oneSubnet(net, prefix, "ipv4"),
  kind,
}));
const refusedV6 = REFUSED_V6.map(([net, prefix, kind]) => ({
  list: oneSubnet(net, prefix, "ipv6"),
  kind,
}));

function oneSubnet(net: string, prefix: number, family: "ipv4" | "ipv6"): BlockList {
  const list = new BlockList();
  list.addSubnet(net, prefix, family);
  return list;
}

/** The kind of refused range `address` lies in, or null for a public address. */
function refusedKind(address: string): string | null {
  const v4 = isIP(address) === 4;
  for (const { list, kind } of v4 ? refusedV4 : refusedV6) {
    if (list.check(address, v4 ? "ipv4" : "ipv6")) return kind;
  }
  return null;
}

/**
 * An IPv6 address that carries an IPv4 one, in any spelling (`::ffff:127.0.0.1`,
 * `0:0:0:0:0:ffff:7f00:1`, `::ffff:0:7f00:1`, NAT64's `64:ff9b::7f00:1`), as that IPv4 address:
 * Node connects `::ffff:7f00:1` to 127.0.0.1, and a NAT64 gateway forwards `64:ff9b::/96` to the
 * IPv4 address inside. Any other address comes back unchanged.
 */
export function unmapped(address: string): string {
  if (isIP(address) !== 6) return address;
  const match = /^(?:::ffff:(?:0:)?|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(
    canonicalV6(address),
  );
  if (!match) return address;
  const high = Number.parseInt(match[1]!, 16);
  const low = Number.parseInt(match[2]!, 16);
  return [high >> 8, high & 255, low >> 8, low & 255].join(".");
}

/** One spelling per IPv6 address (the URL parser's: lower case, zeros compressed, hex tail). */
function canonicalV6(address: string): string {
  try {
    return new URL(`http://[${address}]`).hostname.slice(1, -1);
  } catch {
    return address; // a zone id (`fe80::1%eth0`): no URL spelling, and never a mapped address
  }
}

/** `[::1]` (a URL's hostname) as `::1`. */
export function bareHost(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

/**
 * Why `host` may not be dialled as far as its literal form tells, else null. Node connects to an
 * IP literal without a lookup, so literals are checked here; a name is left to the lookup.
 */
export function refusalOfLiteral(rules: AddressRules, host: string): string | null {
  const bare = bareHost(host);
  return isIP(bare) === 0 ? null : rules.refusal(host, bare);
}

/** How names are resolved: `dns.lookup`'s shape with `all: true` (tests swap in their own). */
export type Resolve = (host: string, family: number) => Promise<LookupAddress[]>;

export const systemResolve: Resolve = (host, family) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, family }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    );
  });

/**
 * A `lookup` for an http(s) Agent: resolves the name (by default through the system's
 * resolver), refuses it when ANY of its addresses is refused (a name with one private address
 * is not worth guessing about), and hands Node exactly the addresses it checked, so the
 * connection goes to one of them.
 */
export function guardedLookup(
  rules: AddressRules,
  resolve: Resolve = systemResolve,
): LookupFunction {
  return (hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    void checkedAddresses(rules, resolve, hostname, family).then(
      (addresses) => {
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ""),
    );
  };
}

async function checkedAddresses(
  rules: AddressRules,
  resolve: Resolve,
  hostname: string,
  family: number,
): Promise<LookupAddress[]> {
  const addresses = await resolve(hostname, family);
  if (addresses.length === 0) {
    throw Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" });
  }
  for (const { address } of addresses) {
    const why = rules.refusal(hostname, address);
    if (why) throw new RefusedAddressError(why);
  }
  return addresses;
}

/** A destination the address rules refuse: its message is meant for the model. */
export class RefusedAddressError extends Error {
  readonly code = "EREFUSEDADDRESS";
}
