/**
 * Guessing the control token (issue 10, docs/security.md): an address is locked out after too
 * many failures while the generated secrets still pass, and a client that resets its WebSocket
 * upgrade while a wrong credential is held back never becomes an uncaught error.
 */
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { rawRequest, rawUpgrade } from "../helpers/raw-http.js";
import {
  API_KEY,
  bearer,
  cleanups,
  runCleanups,
  start,
  stillRunning,
} from "../helpers/security-gateway.js";

afterEach(runCleanups);

describe("guessing the token", () => {
  it("locks an address out after more than 10 failures a minute (429 + Retry-After); the right token still works at once", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) {
      const res = await rawRequest(s.port, {
        path: "/api/status",
        headers: bearer(`guess-${i}-0123456789abcdef`),
      });
      statuses.push(res.status);
      if (res.status === 429) {
        expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
        expect(Number(res.headers["retry-after"])).toBeLessThanOrEqual(60);
      }
    }
    expect(statuses).toEqual([...Array(10).fill(401), 429]);
    // Locked out: every way of guessing answers 429, the login link and the WebSocket included.
    expect(
      (await rawRequest(s.port, { path: "/v1/models", headers: bearer("another-guess-0123") }))
        .status,
    ).toBe(429);
    expect((await rawRequest(s.port, { path: "/?token=yet-another-guess-0123" })).status).toBe(429);
    const ws = await rawUpgrade(s.port, {
      "sec-websocket-protocol": "keel.v1, keel.token.guess-guess-guess",
    });
    expect(ws.status).toBe(429);
    expect(Number(ws.headers["retry-after"])).toBeGreaterThan(0);
    // The API key (chosen by a person, maybe weak) is not even compared while locked out.
    expect(
      (await rawRequest(s.port, { path: "/v1/models", headers: bearer(API_KEY) })).status,
    ).toBe(429);
    // The generated secrets pass: the operator is never locked out by someone else's guesses.
    expect(
      (await rawRequest(s.port, { path: "/api/status", headers: bearer(s.token) })).status,
    ).toBe(200);
    expect(
      (await rawRequest(s.port, { path: `/?token=${encodeURIComponent(s.token)}` })).status,
    ).toBe(303);
    expect((await rawUpgrade(s.port, bearer(s.token))).status).toBe(101);
    // A request without any credential is simply unauthenticated, not a guess.
    expect((await rawRequest(s.port, { path: "/api/status" })).status).toBe(401);
  });
});

/**
 * Sends a raw WebSocket upgrade and resets the connection (TCP RST) right after it, without
 * waiting for an answer: what a client that gives up, or an attacker, does.
 */
function upgradeThenReset(port: number, headers: string, path = "/ws"): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(
        `GET ${path} HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${headers}\r\n`,
        () => {
          socket.resetAndDestroy();
          resolve();
        },
      );
    });
    socket.on("error", reject);
  });
}

describe("a WebSocket upgrade reset by its client", () => {
  it("does not become an uncaught error, while the wrong credential is held back or after a refusal", async () => {
    const s = await start();
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on("uncaughtException", record);
    cleanups.push(() => void process.off("uncaughtException", record));
    // Six failures first, so that the next wrong credential is held back for 800 ms.
    for (let i = 0; i < 6; i++) {
      const res = await rawRequest(s.port, { path: "/api/status", headers: bearer(`guess-${i}`) });
      expect(res.status).toBe(401);
    }
    const host = `Host: 127.0.0.1:${s.port}\r\n`;
    await upgradeThenReset(s.port, `${host}Sec-WebSocket-Protocol: keel.v1, keel.token.wrong\r\n`);
    await upgradeThenReset(s.port, "Host: 127.evil.example\r\n");
    await upgradeThenReset(s.port, host, "/nowhere");
    // The next wrong credential is answered after the held-back one: the resets were read by then.
    const later = await rawRequest(s.port, { path: "/api/status", headers: bearer("guess-x") });
    expect(later.status).toBe(401);
    expect(uncaught.map(String)).toEqual([]);
    expect((await rawRequest(s.port, { path: "/healthz" })).status).toBe(200);
    await stillRunning(s);
  });
});
