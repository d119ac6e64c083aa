import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeWeb, startFakeWeb } from "../../../test/fakes/web-server.js";
import { createAddressRules, type Resolve } from "./address-rules.js";
import { type GuardProxy, startGuardProxy } from "./guard-proxy.js";

let web: FakeWeb;
let proxy: GuardProxy;
/** `*.test` names are the stand-in web on 127.0.0.1. */
const resolve: Resolve = async () => [{ address: "127.0.0.1", family: 4 }];

beforeAll(async () => {
  web = await startFakeWeb();
  proxy = await startGuardProxy(createAddressRules(["site.test"]), resolve);
});
afterAll(async () => {
  await proxy.close();
  await web.close();
});

/** Sends `head` to the proxy on a raw socket; resolves with everything read until it closes or `until` shows. */
function exchange(head: string, until?: RegExp): Promise<string> {
  const port = Number(new URL(proxy.url).port);
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let seen = "";
    socket.on("data", (chunk) => {
      seen += chunk.toString("latin1");
      if (until?.test(seen)) {
        socket.destroy();
        resolve(seen);
      }
    });
    socket.on("close", () => resolve(seen));
    socket.on("error", reject);
    socket.write(head);
  });
}

const auth = () =>
  `Proxy-Authorization: Basic ${Buffer.from(`${proxy.username}:${proxy.password}`).toString("base64")}\r\n`;

describe("the browser's guard proxy", () => {
  it("demands its password, so other local programs cannot use it", async () => {
    const answer = await exchange(`CONNECT site.test:${web.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 407 /);
    const plain = await exchange(
      `GET http://site.test:${web.port}/plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    );
    expect(plain).toMatch(/^HTTP\/1\.1 407 /);
  });

  it("tunnels to an allowed name through the address it checked", async () => {
    const answer = await exchange(
      `CONNECT site.test:${web.port} HTTP/1.1\r\nHost: x\r\n${auth()}\r\n` +
        `GET /plain HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n`,
      /just text/,
    );
    expect(answer).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(answer).toContain("just text");
  });

  it("refuses tunnels and requests to private addresses, and records why", async () => {
    proxy.takeRefusals();
    const before = web.requests.length;
    const tunnel = await exchange(
      `CONNECT 127.0.0.1:${web.port} HTTP/1.1\r\nHost: x\r\n${auth()}\r\n`,
    );
    expect(tunnel).toMatch(/^HTTP\/1\.1 403 /);
    // Loopback spelled as a long-form IPv4-mapped IPv6 literal: Node would connect it.
    const mapped = await exchange(
      `CONNECT [0:0:0:0:0:ffff:7f00:1]:${web.port} HTTP/1.1\r\nHost: x\r\n${auth()}\r\n`,
    );
    expect(mapped).toMatch(/^HTTP\/1\.1 403 /);
    const byName = await exchange(
      `CONNECT other.test:${web.port} HTTP/1.1\r\nHost: x\r\n${auth()}\r\n`,
    );
    expect(byName).toMatch(/^HTTP\/1\.1 403 /);
    const plain = await exchange(
      `GET http://[::1]:${web.port}/plain HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`,
    );
    expect(plain).toMatch(/^HTTP\/1\.1 403 /);
    expect(plain).toContain("Refused by Keel: ::1 is a loopback address");
    expect(proxy.takeRefusals()).toEqual([
      expect.stringContaining("127.0.0.1 is a loopback"),
      expect.stringContaining("0:0:0:0:0:ffff:7f00:1 (127.0.0.1) is a loopback"),
      expect.stringContaining("other.test (127.0.0.1) is a loopback"),
      expect.stringContaining("::1 is a loopback"),
    ]);
    expect(web.requests.length).toBe(before);
  });
});
