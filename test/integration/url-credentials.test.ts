/**
 * A password written into a URL never comes back out (issue 33): an MCP server whose URL carries
 * credentials fails to connect with an error that quotes the URL, and `/api/status` and
 * `keel gateway status` show that error with the password masked.
 */
import { afterEach, describe, expect, it } from "vitest";
import { runCliInProcess } from "../helpers/cli-run.js";
import { rawRequest } from "../helpers/raw-http.js";
import { bearer, runCleanups, start } from "../helpers/security-gateway.js";
import { waitFor } from "../helpers/wait-for.js";

afterEach(runCleanups);

describe("credentials inside URLs", () => {
  it("are masked in /api/status and keel gateway status", async () => {
    const s = await start(
      {},
      "mcp:\n  servers:\n    notes:\n      url: http://keel:mcp-pa55@127.0.0.1:9/mcp\n",
    );
    const body = await waitFor(
      async () => {
        const res = await rawRequest(s.port, { path: "/api/status", headers: bearer(s.token) });
        const status = JSON.parse(res.body) as { mcp?: Record<string, { error: string | null }> };
        return status.mcp?.notes?.error ? res.body : null;
      },
      { timeoutMs: 15_000, message: "the MCP server's error in the status" },
    );
    expect(body).not.toContain("mcp-pa55");
    expect(body).toContain("keel:***@127.0.0.1:9");

    const cli = await runCliInProcess(["gateway", "status", "--json", "--home", s.config.home], {
      env: { KEEL_HTTP_PORT: String(s.port) },
    });
    expect(cli.text).not.toContain("mcp-pa55");
  });
});
