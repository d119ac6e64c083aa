/**
 * Gateways on a shared Postgres judge each other on the database's clock, not their own: a
 * gateway whose clock is an hour off still sees that a live gateway uses its instance id.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load-config.js";
import { PgStore } from "../../src/sessions/pg-store.js";
import { createTestGateway, stopTestGateway } from "../helpers/in-process-gateway.js";
import { createTestSchema, TEST_PG_URL } from "../helpers/store-harness.js";
import { createTempDir } from "../helpers/temp-home.js";

describe.skipIf(process.env.KEEL_TEST_PG === "skip")("a gateway whose clock is off", () => {
  let schema: Awaited<ReturnType<typeof createTestSchema>>;
  let home: ReturnType<typeof createTempDir>;

  beforeEach(async () => {
    schema = await createTestSchema();
    home = createTempDir();
  });
  afterEach(async () => {
    home.cleanup();
    await schema.drop();
  });

  it("still refuses to start under the id of a live gateway on another host", async () => {
    const other = await PgStore.open(TEST_PG_URL, { schema: schema.schema });
    try {
      await other.registerInstance({ id: "gw", host: "elsewhere", pid: 1, startedAt: 1 });
      const url = `${TEST_PG_URL}?options=${encodeURIComponent(`-c search_path=${schema.schema}`)}`;
      const { config } = loadConfig({
        home: home.path,
        env: { KEEL_DATABASE_URL: url, KEEL_INSTANCE_ID: "gw", KEEL_HTTP_PORT: "0" },
      });
      const gateway = createTestGateway(config, { now: () => Date.now() + 3_600_000 });
      await expect(gateway.start()).rejects.toThrow(/another gateway runs as instance gw/);
      await stopTestGateway(gateway).catch(() => {});
    } finally {
      await other.close();
    }
  });
});
