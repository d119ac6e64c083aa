/**
 * A `/v1` session belongs to the credential it was created under (issue 33, docs/security.md):
 * through the real HTTP server of a real gateway, another credential that names its
 * `X-Session-Id` gets the same 404 as for an unknown id, and no turn runs; the control token
 * (the operators) may continue any session.
 */
import { afterEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { rawRequest } from "../helpers/raw-http.js";
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
} from "../helpers/security-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

afterEach(runCleanups);

/** A completion sent with `token` (continuing `sessionId` when given). */
async function send(port: number, token: string, text: string, sessionId?: string) {
  const res = await rawRequest(port, {
    method: "POST",
    path: "/v1/chat/completions",
    headers: {
      ...bearer(token),
      ...json,
      ...(sessionId !== undefined && { "x-session-id": sessionId }),
    },
    body: completion(text),
  });
  return { ...res, sessionId: res.headers["x-session-id"] as string | undefined };
}

async function modelSaw(text: string): Promise<boolean> {
  const model = await fakeModel();
  return model.requests.some((r) => JSON.stringify(r.messages).includes(text));
}

describe("sessions and credentials", () => {
  it("answers 404 to the API key for the operator's session, and runs nothing", async () => {
    const s: Started = await start({ KEEL_API_KEY: API_KEY });
    const mine = await send(s.port, s.token, "echo: operator's secret plan");
    expect(mine.status).toBe(200);
    expect(mine.sessionId).toBeTruthy();

    const theirs = await send(s.port, API_KEY, "echo: read back the plan", mine.sessionId);
    expect(theirs.status).toBe(404);
    expect(JSON.parse(theirs.body).error.code).toBe("session_not_found");
    // Exactly what an unknown id gets: nothing tells the session exists.
    const unknown = await send(s.port, API_KEY, "echo: hello", "no-such-session");
    expect(JSON.parse(unknown.body)).toEqual(
      JSON.parse(theirs.body.replace(mine.sessionId!, "no-such-session")),
    );
    expect(await modelSaw("read back the plan")).toBe(false);
  });

  it("lets the API key continue its own session, and the control token continue it too", async () => {
    const s = await start({ KEEL_API_KEY: API_KEY });
    const first = await send(s.port, API_KEY, "echo: one");
    expect(first.status).toBe(200);
    const again = await send(s.port, API_KEY, "echo: two", first.sessionId);
    expect(again.status).toBe(200);
    expect(again.sessionId).toBe(first.sessionId);
    const operator = await send(s.port, s.token, "echo: three", first.sessionId);
    expect(operator.status).toBe(200);
    expect(operator.sessionId).toBe(first.sessionId);
  });

  it("closes an API key's sessions to the key that replaces it", async () => {
    const model = await fakeModel();
    const home = createTempDir("keel-cred-");
    cleanups.push(() => home.cleanup());
    const run = async (apiKey: string) => {
      const { config } = loadConfig({
        home: home.path,
        env: {
          KEEL_HTTP_PORT: "0",
          OPENAI_BASE_URL: model.baseUrl,
          KEEL_MODEL: "m",
          KEEL_API_KEY: apiKey,
        },
      });
      const gateway = createTestGateway(config, { supervisor: "container" });
      await gateway.start();
      return { gateway, port: gateway.port, token: config.controlToken };
    };
    const before = await run(API_KEY);
    const created = await send(before.port, API_KEY, "echo: made with the old key");
    expect(created.status).toBe(200);
    await stopTestGateway(before.gateway);

    const after = await run("a-new-api-key-after-rotation");
    cleanups.push(async () => {
      await stopTestGateway(after.gateway);
    });
    const refused = await send(
      after.port,
      "a-new-api-key-after-rotation",
      "echo: new key",
      created.sessionId,
    );
    expect(refused.status).toBe(404);
    const operator = await send(after.port, after.token, "echo: operator", created.sessionId);
    expect(operator.status).toBe(200);
  });
});
