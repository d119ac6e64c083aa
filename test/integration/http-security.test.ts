/**
 * The attacker's view of a loopback gateway (issue 10, docs/security.md): DNS rebinding, foreign
 * pages, missing, wrong and query-string credentials on every route, the login cookie, and
 * gateway-wide chat commands from people without operator rights (guessing the token:
 * http-guessing.test.ts). Every test runs against the real HTTP server of a real gateway in this
 * process.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type FakeTelegram, startFakeTelegram } from "../fakes/telegram-server.js";
import { rawRequest, rawUpgrade } from "../helpers/raw-http.js";
import {
  API_KEY,
  bearer,
  cleanups,
  completion,
  fakeModel,
  json,
  runCleanups,
  type Started,
  start,
  stillRunning,
} from "../helpers/security-gateway.js";
import { waitFor } from "../helpers/wait-for.js";

afterEach(runCleanups);

/** Every protected route, as a request without credentials. */
function protectedRoutes(): {
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
}[] {
  return [
    { method: "GET", path: "/api/status" },
    { method: "GET", path: "/api/status/stream" },
    { method: "GET", path: "/api/sessions" },
    { method: "POST", path: "/api/gateway/drain", body: '{"action":"drain"}', headers: json },
    { method: "POST", path: "/api/gateway/restart" },
    { method: "POST", path: "/api/gateway/stop" },
    { method: "GET", path: "/v1/models" },
    { method: "POST", path: "/v1/chat/completions", body: completion("run: id"), headers: json },
    { method: "GET", path: "/" },
    { method: "GET", path: "/dashboard" },
    { method: "GET", path: "/chat.js" },
    { method: "GET", path: "/style.css" },
  ];
}

/** Logs in through the link; returns the `keel_session=…` pair to send as Cookie. */
async function login(s: Started): Promise<string> {
  const res = await rawRequest(s.port, { path: `/?token=${encodeURIComponent(s.token)}` });
  expect(res.status).toBe(303);
  const setCookie = String(res.headers["set-cookie"]);
  return setCookie.split(";")[0]!;
}

describe("DNS rebinding: only exact Host names are answered", () => {
  it("refuses rebinding names and a wrong port with 421 on every route and the WebSocket, even with the token", async () => {
    const s = await start();
    const fake = await fakeModel();
    const hosts = [
      `127.evil.example:${s.port}`,
      `127.0.0.1.nip.io:${s.port}`,
      `localhost.evil:${s.port}`,
      `127.0.0.1:${s.port + 1}`,
      "127.0.0.1",
    ];
    for (const host of hosts) {
      for (const route of protectedRoutes()) {
        const res = await rawRequest(s.port, {
          ...route,
          headers: { ...route.headers, ...bearer(s.token), host },
        });
        expect(res.status, `${host} ${route.method} ${route.path}`).toBe(421);
      }
      const ws = await rawUpgrade(s.port, { host, ...bearer(s.token) });
      expect(ws.status, `${host} /ws`).toBe(421);
    }
    expect(fake.requests).toHaveLength(0);
    await stillRunning(s);
    for (const host of [`localhost:${s.port}`, `[::1]:${s.port}`, `127.0.0.1:${s.port}`]) {
      expect(
        (await rawRequest(s.port, { path: "/api/status", headers: { host, ...bearer(s.token) } }))
          .status,
      ).toBe(200);
    }
  });

  it("answers the names in http.public_hosts exactly as written", async () => {
    const s = await start({ KEEL_HTTP_PUBLIC_HOSTS: "keel.example.com" });
    const ok = await rawRequest(s.port, {
      path: "/v1/models",
      headers: { host: "keel.example.com", ...bearer(s.token) },
    });
    expect(ok.status).toBe(200);
    for (const host of ["keel.example.com:443", "evil.keel.example.com", "keel.example.com.evil"]) {
      const res = await rawRequest(s.port, {
        path: "/v1/models",
        headers: { host, ...bearer(s.token) },
      });
      expect(res.status, host).toBe(421);
    }
  });
});

describe("foreign pages", () => {
  it("refuses a completion posted by a page of another site, even with a valid token, and runs nothing", async () => {
    const s = await start();
    const fake = await fakeModel();
    const res = await fetch(`${s.base}/v1/chat/completions`, {
      method: "POST",
      headers: { ...json, ...bearer(s.token), origin: "https://evil.example" },
      body: completion("run: touch pwned"),
    });
    expect(res.status).toBe(403);
    const plain = await fetch(`${s.base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "text/plain", ...bearer(s.token) },
      body: completion("run: touch pwned"),
    });
    expect(plain.status).toBe(415);
    const stop = await fetch(`${s.base}/api/gateway/stop`, {
      method: "POST",
      headers: { ...bearer(s.token), "sec-fetch-site": "cross-site" },
    });
    expect(stop.status).toBe(403);
    expect(fake.requests).toHaveLength(0);
    await stillRunning(s);
  });

  it("ignores the session cookie on requests started by another origin (another port of localhost included)", async () => {
    const s = await start();
    const cookie = await login(s);
    const otherPort = `http://127.0.0.1:${s.port + 1}`;
    const read = await rawRequest(s.port, {
      path: "/api/sessions",
      headers: { cookie, origin: otherPort },
    });
    expect(read.status).toBe(401);
    const fetched = await rawRequest(s.port, {
      path: "/api/sessions",
      headers: { cookie, "sec-fetch-site": "same-site", "sec-fetch-mode": "cors" },
    });
    expect(fetched.status).toBe(401);
    const ws = await rawUpgrade(s.port, { cookie, origin: otherPort });
    expect(ws.status).toBe(403);
    const wsEvil = await rawUpgrade(s.port, { cookie, origin: "https://evil.example" });
    expect(wsEvil.status).toBe(403);
    // The page itself (same origin) is served.
    const own = await rawRequest(s.port, {
      path: "/api/sessions",
      headers: { cookie, origin: s.base },
    });
    expect(own.status).toBe(200);
  });
});

describe("credentials on every route, loopback included", () => {
  it("answers 401 without a credential on every route and the WebSocket; the probes stay open", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    const fake = await fakeModel();
    for (const route of protectedRoutes()) {
      const res = await rawRequest(s.port, route);
      expect(res.status, `${route.method} ${route.path}`).toBe(401);
      if (route.path !== "/" && route.path !== "/dashboard") {
        expect(JSON.parse(res.body).error, route.path).toBeTruthy();
      }
    }
    expect((await rawUpgrade(s.port)).status).toBe(401);
    expect((await rawRequest(s.port, { path: "/healthz" })).status).toBe(200);
    expect((await rawRequest(s.port, { path: "/readyz" })).status).toBe(200);
    expect(fake.requests).toHaveLength(0);
    await stillRunning(s);
  });

  it("shows a person without a session a page that says to open the login link", async () => {
    const s = await start();
    const page = await rawRequest(s.port, { path: "/" });
    expect(page.status).toBe(401);
    expect(page.headers["content-type"]).toMatch(/text\/html/);
    expect(page.body).toContain("keel open");
    expect(page.body).not.toContain(s.token);
  });

  it("answers 401 to wrong credentials on every route and the WebSocket, and the API key only on /v1", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    const wrong = bearer("wrong-token-wrong-token-wrong");
    const routes = protectedRoutes().filter((r) =>
      ["/api/status", "/api/gateway/stop", "/v1/chat/completions", "/", "/chat.js"].includes(
        r.path,
      ),
    );
    for (const route of routes) {
      const res = await rawRequest(s.port, { ...route, headers: { ...route.headers, ...wrong } });
      expect(res.status, `${route.method} ${route.path}`).toBe(401);
    }
    expect(
      (
        await rawUpgrade(s.port, {
          "sec-websocket-protocol": "keel.v1, keel.token.wrong-token-wrong",
        })
      ).status,
    ).toBe(401);
    // The API key is a /v1 credential, not a control-API or web one.
    expect(
      (await rawRequest(s.port, { path: "/v1/models", headers: bearer(API_KEY) })).status,
    ).toBe(200);
    expect(
      (await rawRequest(s.port, { path: "/api/status", headers: bearer(API_KEY) })).status,
    ).toBe(401);
    expect((await rawRequest(s.port, { path: "/", headers: bearer(API_KEY) })).status).toBe(401);
    expect((await rawUpgrade(s.port, bearer(API_KEY))).status).toBe(401);
    // The control token works everywhere.
    for (const path of ["/api/status", "/v1/models", "/", "/dashboard", "/chat.js"]) {
      expect((await rawRequest(s.port, { path, headers: bearer(s.token) })).status, path).toBe(200);
    }
    expect((await rawUpgrade(s.port, bearer(s.token))).status).toBe(101);
    expect(
      (await rawUpgrade(s.port, { "sec-websocket-protocol": `keel.v1, keel.token.${s.token}` }))
        .status,
    ).toBe(101);
    await stillRunning(s);
  });

  it("never takes the right token from a query string, except on the login link", async () => {
    const s = await start();
    const q = `token=${encodeURIComponent(s.token)}`;
    for (const route of protectedRoutes().filter((r) => r.path !== "/")) {
      const res = await rawRequest(s.port, { ...route, path: `${route.path}?${q}` });
      expect(res.status, `${route.method} ${route.path}?token`).toBe(401);
    }
    expect((await rawUpgrade(s.port, {}, `/ws?${q}`)).status).toBe(401);
    expect((await rawRequest(s.port, { method: "POST", path: `/?${q}` })).status).toBe(401);
    await stillRunning(s);
  });
});

describe("login link and session cookie", () => {
  it("sets an HttpOnly SameSite=Strict cookie that is not the token, redirects without it, and opens the pages", async () => {
    const s = await start();
    const res = await rawRequest(s.port, { path: `/?token=${encodeURIComponent(s.token)}` });
    expect(res.status).toBe(303);
    expect(res.headers.location).toBe("/");
    const setCookie = String(res.headers["set-cookie"]);
    expect(setCookie).toMatch(/^keel_session=/);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Path=/");
    expect(setCookie).not.toContain(s.token);
    const cookie = setCookie.split(";")[0]!;
    for (const path of ["/", "/dashboard", "/chat.js", "/style.css", "/api/status"]) {
      expect((await rawRequest(s.port, { path, headers: { cookie } })).status, path).toBe(200);
    }
    expect((await rawUpgrade(s.port, { cookie })).status).toBe(101);
    // The cookie is for the browser pages, not for API clients.
    expect((await rawRequest(s.port, { path: "/v1/models", headers: { cookie } })).status).toBe(
      401,
    );
  });

  it("refuses a wrong login link, and the cookie of another gateway", async () => {
    const one = await start();
    const two = await start();
    const wrong = await rawRequest(one.port, { path: `/?token=${encodeURIComponent(two.token)}` });
    expect(wrong.status).toBe(401);
    expect(wrong.headers["set-cookie"]).toBeUndefined();
    const cookieOfTwo = await login(two);
    const res = await rawRequest(one.port, {
      path: "/api/status",
      headers: { cookie: cookieOfTwo },
    });
    expect(res.status).toBe(401);
    // A stale cookie is removed so the browser stops sending it.
    expect(String(res.headers["set-cookie"])).toMatch(/^keel_session=;.*Max-Age=0/);
    expect((await rawUpgrade(one.port, { cookie: cookieOfTwo })).status).toBe(401);
    expect(
      (await rawRequest(one.port, { path: "/", headers: { cookie: `keel_session=${one.token}` } }))
        .status,
    ).toBe(401);
  });
  it("keeps every answer to a URL with a token out of caches and Referer headers", async () => {
    const s = await start();
    const q = `token=${encodeURIComponent(s.token)}`;
    const cookie = await login(s);
    const answers = [
      await rawRequest(s.port, { path: `/?${q}` }),
      await rawRequest(s.port, { path: `/?${q}`, headers: { "sec-fetch-site": "cross-site" } }),
      await rawRequest(s.port, { path: "/?token=a-wrong-token-0123456789" }),
      await rawRequest(s.port, { path: `/dashboard?${q}` }),
      await rawRequest(s.port, { path: `/dashboard?${q}`, headers: { cookie } }),
      await rawRequest(s.port, { path: `/api/status?${q}` }),
    ];
    expect(answers.map((a) => a.status)).toEqual([303, 200, 401, 401, 200, 401]);
    for (const [i, answer] of answers.entries()) {
      expect(answer.headers["cache-control"], `answer ${i}`).toBe("no-store");
      expect(answer.headers["referrer-policy"], `answer ${i}`).toBe("no-referrer");
    }
  });
});

describe("operator rights for gateway-wide commands", () => {
  it("refuses /restart through /v1 with platforms.api.key and restarts with the control token", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    const refused = await fetch(`${s.base}/v1/chat/completions`, {
      method: "POST",
      headers: { ...json, ...bearer(API_KEY) },
      body: completion("/restart"),
    });
    expect(refused.status).toBe(200);
    const body = (await refused.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]!.message.content).toMatch(/operator rights/);
    await stillRunning(s);

    void fetch(`${s.base}/v1/chat/completions`, {
      method: "POST",
      headers: { ...json, ...bearer(s.token) },
      body: completion("/restart"),
    }).catch(() => {});
    expect(await s.gateway.exited).toBe(75);
  });

  it("refuses /restart from a Telegram user who is allowed but not an admin; an admin restarts", async () => {
    const telegram: FakeTelegram = await startFakeTelegram({ token: "123456:TEST-token" });
    cleanups.push(() => telegram.close());
    const s = await start({
      TELEGRAM_BOT_TOKEN: "123456:TEST-token",
      TELEGRAM_API_ROOT: telegram.apiRoot,
      TELEGRAM_ALLOWED_USERS: "4242",
      TELEGRAM_ADMIN_USERS: "7",
    });
    telegram.sendUserMessage({ chatId: 4242, text: "/restart" });
    const refusal = await telegram.waitForSent(
      (call) => call.method === "sendMessage" && String(call.payload.chat_id) === "4242",
      10_000,
    );
    expect(String(refusal.payload.text)).toMatch(/operator rights/);
    await stillRunning(s);

    telegram.sendUserMessage({ chatId: 7, text: "/restart" });
    expect(await s.gateway.exited).toBe(75);
  });
});

describe("http.trust_loopback", () => {
  it("restores credential-free loopback (operator rights included) but keeps the Host check", async () => {
    const s = await start({ KEEL_HTTP_TRUST_LOOPBACK: "true" });
    for (const path of ["/api/status", "/v1/models", "/", "/dashboard"]) {
      expect((await rawRequest(s.port, { path })).status, path).toBe(200);
    }
    expect((await rawUpgrade(s.port)).status).toBe(101);
    expect(
      (
        await rawRequest(s.port, {
          path: "/api/status",
          headers: { host: `127.evil.example:${s.port}` },
        })
      ).status,
    ).toBe(421);
    // A wrong login link still sets no cookie.
    const wrong = await rawRequest(s.port, { path: "/?token=wrong-wrong-wrong-wrong" });
    expect(wrong.headers["set-cookie"]).toBeUndefined();
    void fetch(`${s.base}/v1/chat/completions`, {
      method: "POST",
      headers: json,
      body: completion("/restart"),
    }).catch(() => {});
    await waitFor(() => !s.gateway.isReady(), { timeoutMs: 10_000 });
    expect(await s.gateway.exited).toBe(75);
  });
});
