/**
 * A real gateway process on a Postgres store (KEEL_DATABASE_URL): it answers, journals a tool
 * call, is SIGKILLed, and a gateway started in ANOTHER home on the same database sees everything,
 * as do the CLI commands; no state.db is written anywhere. (Several gateways at once, with leases,
 * are issue 20's next step; this proves the store choice end to end.)
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { type GatewayProcess, runKeel, startGatewayProcess } from "../helpers/gateway-process.js";
import { adminQuery, createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import { waitFor } from "../helpers/wait-for.js";

interface Completion {
  choices: Array<{ message: { content: string } }>;
}

describe.skipIf(process.env.KEEL_TEST_PG === "skip")("a gateway on Postgres", () => {
  let fake: FakeOpenAI;
  let homes: string[];
  let gateways: GatewayProcess[];
  let schema: Awaited<ReturnType<typeof createTestSchema>>;
  let env: Record<string, string>;

  beforeEach(async () => {
    fake = await startFakeOpenAI();
    schema = await createTestSchema();
    homes = [];
    gateways = [];
    // The schema rides in the URL, as an operator would put Keel's tables in a schema of their own.
    const url = `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`;
    env = { OPENAI_BASE_URL: fake.baseUrl, KEEL_MODEL: "fake-model", KEEL_DATABASE_URL: url };
  });
  afterEach(async () => {
    await Promise.all(gateways.map((g) => g.stop()));
    await fake.close();
    await schema.drop();
    for (const home of homes) rmSync(home, { recursive: true, force: true });
  });

  async function start(): Promise<{ gateway: GatewayProcess; home: string }> {
    const home = mkdtempSync(join(tmpdir(), "keel-e2e-pg-"));
    homes.push(home);
    const gateway = await startGatewayProcess({ home, env });
    gateways.push(gateway);
    await gateway.waitForReady();
    return { gateway, home };
  }

  async function send(gateway: GatewayProcess, content: string, sessionId?: string) {
    const res = await gateway.control("/v1/chat/completions", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(sessionId && { "X-Session-Id": sessionId }),
      },
      body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content }] }),
    });
    const body = (await res.json()) as Completion;
    return {
      status: res.status,
      text: body.choices[0]!.message.content,
      id: res.headers.get("x-session-id"),
    };
  }

  it("keeps the conversation in the database, not in the home", async () => {
    const first = await start();
    const answer = await send(first.gateway, "run: echo from-postgres");
    expect(answer).toMatchObject({ status: 200, text: "ran: from-postgres" });
    first.gateway.kill("SIGKILL");
    await first.gateway.waitForExit();

    const tools = await adminQuery(
      `SELECT name, state FROM ${schema.schema}.tool_calls ORDER BY id`,
    );
    expect(tools).toEqual([{ name: "terminal", state: "finished" }]);

    const second = await start();
    const res = await second.gateway.control(`/api/sessions/${answer.id}`);
    expect(res.status).toBe(200);
    const stored = (await res.json()) as { messages: Array<{ role: string }> };
    expect(stored.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant"]);

    const listed = await runKeel({ home: second.home, env, args: ["sessions", "list"] });
    expect(listed.stdout).toContain(answer.id!);
    const doctor = await runKeel({ home: second.home, env, args: ["doctor"] });
    expect(doctor.stdout).toMatch(
      /store.*Postgres postgres:\/\/postgres@127\.0\.0\.1:5432\/test.*schema v\d+/,
    );
    for (const home of homes) expect(existsSync(join(home, "state.db"))).toBe(false);
  });

  it("registers itself, runs each turn under the session's lease, and leaves on a planned stop", async () => {
    env.KEEL_INSTANCE_ID = "gw-one";
    const { gateway, home } = await start();
    const status = await runKeel({
      home,
      env: { ...env, KEEL_HTTP_PORT: String(gateway.port) },
      args: ["gateway", "status", "--json"],
    });
    const report = JSON.parse(status.stdout) as {
      instances: { id: string; pid: number; self: boolean }[];
    };
    expect(report.instances).toEqual([
      expect.objectContaining({ id: "gw-one", pid: gateway.pid, self: true }),
    ]);
    const answer = await send(gateway, "run: echo leased");
    expect(answer.text).toBe("ran: leased");
    // The turn ran under the lease (fence 1) and lets it go once it has ended.
    const leases = await waitFor(
      async () => {
        const rows = await adminQuery(
          `SELECT session_key, owner, fence, expires_at FROM ${schema.schema}.session_leases
             WHERE session_key NOT LIKE 'outbox:%'`,
        );
        return rows[0]?.expires_at === "0" ? rows : null;
      },
      { message: "the session's lease released" },
    );
    expect(leases).toEqual([
      { session_key: expect.stringContaining("api"), owner: "gw-one", fence: "1", expires_at: "0" },
    ]);
    await gateway.terminate();
    expect(await adminQuery(`SELECT id FROM ${schema.schema}.instances`)).toEqual([]);
  });

  it("two gateways on one session take turns: the second waits for the first's lease", async () => {
    const a = await start();
    const b = await start();
    const { id } = await send(a.gateway, "echo: hello");
    // A runs a turn whose tool takes a while; B gets a message for the same session meanwhile.
    const slow = send(a.gateway, "run: sleep 1 && echo slow", id!);
    await waitFor(
      async () =>
        (await adminQuery(`SELECT 1 FROM ${schema.schema}.tool_calls WHERE state = 'started'`))
          .length > 0,
      { message: "A's tool call started" },
    );
    const quick = send(b.gateway, "echo: quick", id!);
    expect((await Promise.all([slow, quick])).map((r) => r.text)).toEqual(["ran: slow", "quick"]);
    // Without the lease B's turn would have landed in the middle of A's (between the tool call
    // and its result); with it, the transcript holds the two turns one after the other.
    const res = await b.gateway.control(`/api/sessions/${id}`);
    const stored = (await res.json()) as { messages: Array<{ role: string; content: string }> };
    expect(stored.messages.map((m) => `${m.role}:${m.content ?? ""}`)).toEqual([
      "user:echo: hello",
      "assistant:hello",
      "user:run: sleep 1 && echo slow",
      "assistant:",
      "tool:slow\n[exit code 0]",
      "assistant:ran: slow",
      "user:echo: quick",
      "assistant:quick",
    ]);
  });

  it("a gateway SIGKILLed mid-turn: another takes the session over within the lease TTL, no tool re-run", async () => {
    env.KEEL_LEASE_TTL = "1";
    const a = await start();
    const b = await start();
    const { id } = await send(a.gateway, "echo: hello");
    const cut = send(a.gateway, "run: sleep 30 && echo never", id!).catch(() => null);
    await waitFor(
      async () =>
        (await adminQuery(`SELECT 1 FROM ${schema.schema}.tool_calls WHERE state = 'started'`))
          .length > 0,
      { message: "A's tool call started" },
    );
    a.gateway.kill("SIGKILL");
    await a.gateway.waitForExit();
    await cut;
    // B notices that nobody renews the lease and resumes the turn as a restart would.
    const resumed = await waitFor(
      async () => {
        const rows = await adminQuery(
          `SELECT id FROM ${schema.schema}.turns WHERE inbox_id IS NULL AND state = 'done'`,
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 20_000, message: "B resumed the cut-off turn" },
    );
    expect(resumed).toHaveLength(1);
    const tools = await adminQuery(`SELECT state, result FROM ${schema.schema}.tool_calls`);
    expect(tools).toEqual([
      { state: "finished", result: expect.stringContaining("outcome is unknown") },
    ]);
    const res = await b.gateway.control(`/api/sessions/${id}`);
    const stored = (await res.json()) as { messages: Array<{ role: string; content: string }> };
    expect(stored.messages.at(-1)).toMatchObject({ role: "assistant" });
    expect(stored.messages.filter((m) => m.role === "tool")).toHaveLength(1);
  });

  it("refuses to start a second gateway under an instance id that is alive", async () => {
    env.KEEL_INSTANCE_ID = "same";
    await start();
    const home = mkdtempSync(join(tmpdir(), "keel-e2e-pg-"));
    homes.push(home);
    const second = await startGatewayProcess({ home, env });
    gateways.push(second);
    const exit = await second.waitForExit();
    expect(exit.code).not.toBe(0);
    expect(second.output()).toContain("another gateway runs as instance same");
  });

  it("restarts at once under the same instance id after a SIGKILL (the old row is its own)", async () => {
    env.KEEL_INSTANCE_ID = "steady";
    const first = await start();
    first.gateway.kill("SIGKILL");
    await first.gateway.waitForExit();
    const again = await startGatewayProcess({ home: first.home, env });
    gateways.push(again);
    await again.waitForReady();
    const rows = await adminQuery(`SELECT id, pid FROM ${schema.schema}.instances`);
    expect(rows).toEqual([{ id: "steady", pid: again.pid }]);
  });
});
