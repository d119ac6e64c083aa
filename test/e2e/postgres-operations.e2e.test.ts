/**
 * What operators of gateways on a shared Postgres store meet when things fail (documented in
 * docs/operations.md): the database unreachable for a while (through a loopback relay that is
 * cut and restored), and a gateway frozen (SIGSTOP) past its lease while it ran a tool.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type FakeOpenAI, startFakeOpenAI } from "../fakes/openai-server.js";
import { startTcpProxy, type TcpProxy } from "../fakes/tcp-proxy.js";
import { type GatewayProcess, runKeel, startGatewayProcess } from "../helpers/gateway-process.js";
import { adminQuery, createTestSchema } from "../helpers/store-harness.js";
import { waitFor } from "../helpers/wait-for.js";

interface Answer {
  status: number;
  body: string;
  id: string | null;
}

describe.skipIf(process.env.KEEL_TEST_PG === "skip")(
  "gateways on Postgres when things fail",
  () => {
    let fake: FakeOpenAI;
    let proxy: TcpProxy;
    let schema: Awaited<ReturnType<typeof createTestSchema>>;
    let gateways: GatewayProcess[];
    let homes: string[];
    let env: Record<string, string>;

    beforeEach(async () => {
      fake = await startFakeOpenAI();
      schema = await createTestSchema();
      proxy = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
      gateways = [];
      homes = [];
      const search = encodeURIComponent(`-c search_path=${schema.schema}`);
      env = {
        OPENAI_BASE_URL: fake.baseUrl,
        KEEL_MODEL: "fake-model",
        KEEL_DATABASE_URL: `postgres://postgres@127.0.0.1:${proxy.port}/test?options=${search}`,
      };
    });
    afterEach(async () => {
      for (const g of gateways) g.kill("SIGCONT");
      await Promise.all(gateways.map((g) => g.stop()));
      await proxy.close();
      await fake.close();
      await schema.drop();
      for (const home of homes) rmSync(home, { recursive: true, force: true });
    });

    async function start(extra: Record<string, string> = {}): Promise<GatewayProcess> {
      const home = mkdtempSync(join(tmpdir(), "keel-e2e-pgops-"));
      homes.push(home);
      const gateway = await startGatewayProcess({ home, env: { ...env, ...extra } });
      gateways.push(gateway);
      await gateway.waitForReady();
      return gateway;
    }

    async function send(gateway: GatewayProcess, content: string, id?: string): Promise<Answer> {
      const res = await gateway.control("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json", ...(id && { "X-Session-Id": id }) },
        body: JSON.stringify({ model: "fake-model", messages: [{ role: "user", content }] }),
      });
      return { status: res.status, body: await res.text(), id: res.headers.get("x-session-id") };
    }

    async function readyz(gateway: GatewayProcess): Promise<number> {
      const res = await gateway.fetch("/readyz");
      await res.body?.cancel();
      return res.status;
    }

    const toolStarted = async () =>
      (await adminQuery(`SELECT 1 FROM ${schema.schema}.tool_calls WHERE state = 'started'`))
        .length > 0;

    it("the database unreachable mid-run: not ready, refuses new messages, resumes the cut turn once it answers", async () => {
      const gateway = await start({ KEEL_LEASE_TTL: "2" });
      const { id } = await send(gateway, "echo: before");
      const cut = send(gateway, "run: sleep 2 && echo cut", id!);
      await waitFor(toolStarted, { message: "the tool call started" });
      await proxy.cut();

      // The turn cannot record its tool result: the client hears so, told it resumes later.
      const failed = await cut;
      expect(failed.status).toBe(502);
      expect(failed.body).toContain("resumed once the database answers again");
      // New messages are refused (nothing accepted), and /readyz sends traffic elsewhere.
      const refused = await send(gateway, "echo: during", id!);
      expect(refused.status).toBe(503);
      await waitFor(async () => (await readyz(gateway)) === 503, {
        timeoutMs: 10_000,
        message: "/readyz 503 while the store does not answer",
      });
      expect(gateway.output()).toContain("heartbeat failed: the store does not answer");
      expect(gateway.output()).not.toContain("lease moved to another instance");

      await proxy.restore();
      await waitFor(async () => (await readyz(gateway)) === 200, {
        timeoutMs: 15_000,
        message: "/readyz 200 again",
      });
      // The cut turn is taken over as a restart would: the tool is not run again.
      await waitFor(
        async () =>
          (
            await adminQuery(
              `SELECT 1 FROM ${schema.schema}.turns WHERE inbox_id IS NULL AND state = 'done'`,
            )
          ).length > 0,
        { timeoutMs: 20_000, message: "the cut turn resumed" },
      );
      expect(await adminQuery(`SELECT state, result FROM ${schema.schema}.tool_calls`)).toEqual([
        { state: "finished", result: expect.stringContaining("outcome is unknown") },
      ]);
      const after = await send(gateway, "echo: after", id!);
      expect(after.status).toBe(200);
      expect(JSON.parse(after.body).choices[0].message.content).toBe("after");
    }, 90_000);

    it("a /v1 request whose message another gateway adopted while this one could not reach the database gets that gateway's reply", async () => {
      const ttl = { KEEL_LEASE_TTL: "1", KEEL_GATEWAY_BUSY_INPUT_MODE: "queue" };
      const a = await start({ ...ttl, KEEL_INSTANCE_ID: "cut-off" });
      const direct = env.KEEL_DATABASE_URL!.replace(`:${proxy.port}/`, ":5432/");
      await start({ ...ttl, KEEL_INSTANCE_ID: "survivor", KEEL_DATABASE_URL: direct });
      const { id } = await send(a, "echo: hello");
      // A's turn runs a tool that ends only when the test says so; the next message queues.
      // In the workspace: the sandbox hides the rest of the home from commands.
      const gate = join(a.home, "workspace", "gate");
      const first = send(a, `run: while [ ! -e ${gate} ]; do sleep 0.1; done; echo first`, id!);
      // Awaited below; should the test fail before that, its gateway's stop must not surface here.
      first.catch(() => {});
      // A first model call and a sandboxed command: seconds on a loaded machine.
      await waitFor(toolStarted, { timeoutMs: 30_000, message: "A's tool call started" });
      let second: Answer | null = null;
      // Not awaited here: the request waits; a failed one shows as the wait below timing out.
      send(a, "echo: second", id!).then(
        (answer) => {
          second = answer;
        },
        () => {},
      );
      const inboxState = async (text: string) =>
        (
          await adminQuery(
            `SELECT state FROM ${schema.schema}.inbox WHERE text = '${text}' ORDER BY id`,
          )
        )[0]?.state;
      await waitFor(async () => (await inboxState("echo: second")) === "pending", {
        message: "the second message queued on A",
      });
      // A loses the database: the survivor takes its turn over and adopts the queued message.
      await proxy.cut();
      await waitFor(async () => (await inboxState("echo: second")) === "done", {
        timeoutMs: 40_000,
        message: "the survivor answered the adopted message",
      });
      await proxy.restore();
      writeFileSync(gate, "");
      // A's own turn could not record its end (its lease moved on): the client hears so.
      expect((await first).status).toBe(502);
      // The waiting request learns the answer from the record, not from A's own turns.
      const answer = await waitFor(() => second, {
        timeoutMs: 20_000,
        message: "the second request answered",
      });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body).choices[0].message.content).toBe("second");
      // One turn answered it, the survivor's.
      const turns = await adminQuery(
        `SELECT t.state FROM ${schema.schema}.turns t JOIN ${schema.schema}.inbox i
           ON i.id = t.inbox_id WHERE i.text = 'echo: second'`,
      );
      expect(turns).toEqual([{ state: "done" }]);
    }, 120_000);

    it("keel gateway status in the home of a killed gateway lists the others from the store", async () => {
      const ttl = { KEEL_LEASE_TTL: "1" };
      const a = await start({ ...ttl, KEEL_INSTANCE_ID: "gw-a" });
      await start({ ...ttl, KEEL_INSTANCE_ID: "gw-b" });
      a.kill("SIGKILL");
      await a.waitForExit();
      const status = async () => {
        const run = await runKeel({
          home: a.home,
          env: { ...env, ...ttl, KEEL_INSTANCE_ID: "gw-a" },
          args: ["gateway", "status", "--json"],
        });
        return JSON.parse(run.stdout) as {
          running: boolean;
          instances?: { id: string; alive: boolean; self: boolean }[];
        };
      };
      const report = await waitFor(
        async () => {
          const r = await status();
          return r.instances?.find((i) => i.id === "gw-a")?.alive === false ? r : null;
        },
        { timeoutMs: 20_000, message: "gw-a listed as dead" },
      );
      expect(report.running).toBe(false);
      expect(report.instances).toEqual([
        expect.objectContaining({ id: "gw-a", alive: false, self: true }),
        expect.objectContaining({ id: "gw-b", alive: true, self: false }),
      ]);
    }, 60_000);

    it("the database host dropping packets: /readyz says so within a lease TTL, and recovers", async () => {
      const gateway = await start({ KEEL_LEASE_TTL: "2" });
      expect((await send(gateway, "echo: before")).status).toBe(200);
      // Nothing fails: calls hang. The heartbeat that does not get through still counts.
      proxy.freeze();
      await waitFor(async () => (await readyz(gateway)) === 503, {
        timeoutMs: 15_000,
        message: "/readyz 503 while no heartbeat gets through",
      });
      proxy.thaw();
      await waitFor(async () => (await readyz(gateway)) === 200, {
        timeoutMs: 20_000,
        message: "/readyz 200 again",
      });
      expect((await send(gateway, "echo: after")).status).toBe(200);
    }, 60_000);

    it("a gateway frozen mid-tool: a survivor takes over, forgets its row; woken, it registers again and cannot write", async () => {
      const ttl = { KEEL_LEASE_TTL: "1" };
      const a = await start({ ...ttl, KEEL_INSTANCE_ID: "frozen" });
      const b = await start({ ...ttl, KEEL_INSTANCE_ID: "survivor" });
      const { id } = await send(a, "echo: hello");
      const cut = send(a, "run: sleep 2 && echo late", id!).catch(() => null);
      // A first model call and a sandboxed command: seconds on a loaded machine.
      await waitFor(toolStarted, { timeoutMs: 30_000, message: "A's tool call started" });
      a.kill("SIGSTOP");

      const instances = () => adminQuery(`SELECT id FROM ${schema.schema}.instances ORDER BY id`);
      // B resumes the turn, then (silent 10 TTLs, nothing left to take over) removes A's row.
      await waitFor(async () => (await instances()).length === 1, {
        timeoutMs: 40_000,
        message: "the frozen gateway's row removed",
      });
      expect(await instances()).toEqual([{ id: "survivor" }]);
      expect(b.output()).toContain("removed the row of a dead gateway");

      a.kill("SIGCONT");
      await cut;
      await waitFor(async () => (await instances()).length === 2, {
        timeoutMs: 10_000,
        message: "the woken gateway registered again",
      });
      await waitFor(() => a.output().includes("lease moved to another instance"), {
        timeoutMs: 10_000,
        message: "the woken gateway's writes refused",
      });
      // One tool result only: B's "outcome unknown"; A's late result was refused by the fence.
      const tools = await adminQuery(`SELECT state, result FROM ${schema.schema}.tool_calls`);
      expect(tools).toEqual([
        { state: "finished", result: expect.stringContaining("outcome is unknown") },
      ]);
      const results = await adminQuery(
        `SELECT body FROM ${schema.schema}.messages WHERE role = 'tool'`,
      );
      expect(results).toHaveLength(1);
      expect(String(results[0]!.body)).toContain("outcome is unknown");
      expect(await readyz(a)).toBe(200);
      // Awake and registered again, it serves the session under a fresh lease.
      const awake = await send(a, "echo: awake", id!);
      expect(awake.status).toBe(200);
      expect(JSON.parse(awake.body).choices[0].message.content).toBe("awake");
    }, 90_000);
  },
);
