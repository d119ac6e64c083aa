import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { rawRequest } from "../../test/helpers/raw-http.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import type { AppEnv } from "./access-gate.js";
import { clientGoneSignal, onClientGone, readJson } from "./node-request.js";

let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  server = undefined;
});

async function serve(app: Hono<AppEnv>): Promise<number> {
  server = createServer(getRequestListener(app.fetch));
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return (server!.address() as AddressInfo).port;
}

/** A raw POST of JSON to /json: with `chunked`, the body goes without a Content-Length. */
async function post(port: number, body: string, chunked = false) {
  const answer = await rawRequest(port, {
    method: "POST",
    path: "/json",
    headers: { "content-type": "application/json" },
    body,
    chunked,
  });
  return { status: answer.status, text: answer.body };
}

describe("readJson", () => {
  it("reads a body of a declared length and a chunked one alike, and refuses bad JSON", async () => {
    const app = new Hono<AppEnv>();
    app.post("/json", async (c) => {
      try {
        return c.json({ got: await readJson(c) });
      } catch {
        return c.text("bad json", 400);
      }
    });
    const port = await serve(app);
    const body = JSON.stringify({ text: "héllo ".repeat(5000) });
    expect(await post(port, body)).toEqual({
      status: 200,
      text: JSON.stringify({ got: JSON.parse(body) }),
    });
    expect(await post(port, body, true)).toEqual({
      status: 200,
      text: JSON.stringify({ got: JSON.parse(body) }),
    });
    expect(await post(port, "{nope")).toEqual({ status: 400, text: "bad json" });
  });

  it("reads through the web Request in process, where there is no Node request", async () => {
    const app = new Hono<AppEnv>();
    app.post("/json", async (c) => c.json({ got: await readJson(c) }));
    const res = await app.request("/json", { method: "POST", body: '{"a":1}' });
    expect(await res.json()).toEqual({ got: { a: 1 } });
  });
});

describe("onClientGone and clientGoneSignal", () => {
  it("fire when the client hangs up before its answer, and not after an answer", async () => {
    const gone: string[] = [];
    const signals: AbortSignal[] = [];
    let release: () => void = () => {};
    const app = new Hono<AppEnv>();
    app.get("/:name", async (c) => {
      const name = c.req.param("name");
      onClientGone(c, () => gone.push(name));
      signals.push(clientGoneSignal(c));
      if (name === "slow") await new Promise<void>((resolve) => (release = resolve));
      return c.text(name);
    });
    const port = await serve(app);
    const quick = await fetch(`http://127.0.0.1:${port}/quick`);
    expect(await quick.text()).toBe("quick");

    const hangUp = request({ host: "127.0.0.1", port, path: "/slow" });
    hangUp.on("error", () => {});
    hangUp.end();
    await waitFor(() => signals.length === 2);
    hangUp.destroy();
    await waitFor(() => gone.length > 0);
    release();
    expect(gone).toEqual(["slow"]);
    expect(signals.map((s) => s.aborted)).toEqual([false, true]);
  });
});
