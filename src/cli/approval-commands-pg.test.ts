/**
 * `keel approvals` with the gateway down reads and answers the store the config selects: on a
 * Postgres store.url that is Postgres, not a state.db the home happens to have.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { turnAskingApproval } from "../../test/helpers/approval-request.js";
import { runCliInProcess } from "../../test/helpers/cli-run.js";
import { testDatabase } from "../../test/helpers/store-harness.js";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { PgStore } from "../sessions/pg-store.js";

const skip = process.env.KEEL_TEST_PG === "skip";
const db = testDatabase("keel_approvals_cli");
const url = db.url;

describe.skipIf(skip)("keel approvals on a Postgres store", () => {
  const dir = createTempDir();
  beforeAll(async () => {
    await db.create();
    const store = await PgStore.open(url);
    await store.requestApproval(await turnAskingApproval(store, Date.now() + 600_000));
    await store.close();
  });
  afterAll(async () => {
    await db.drop();
    dir.cleanup();
  });

  const keel = (...args: string[]) =>
    runCliInProcess(["--home", join(dir.path, "home"), ...args], {
      env: { KEEL_DATABASE_URL: url },
    });

  it("lists, shows and answers the waiting approval stored in Postgres", async () => {
    const listed = await keel("approvals", "list", "--json");
    expect(listed.code, listed.text).toBe(0);
    expect(JSON.parse(listed.out.join("\n")).map((a: { id: string }) => a.id)).toEqual([
      "ab12cd34ef",
    ]);
    const shown = await keel("approvals", "show", "ab12cd34ef");
    expect(shown.text).toContain("rm -rf build");

    const denied = await keel("approvals", "deny", "ab12cd34ef");
    expect(denied.code, denied.text).toBe(0);
    const store = await PgStore.open(url);
    const record = await store.getApproval("ab12cd34ef");
    await store.close();
    expect(record).toMatchObject({ state: "denied", decision: "deny" });
  });
});
