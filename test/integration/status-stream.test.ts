/**
 * The dashboard's live status stream: every client gets the status at once and again on each
 * change, pushed from the gateway's change signal (no client polls).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.js";
import { createTempDir } from "../helpers/temp-home.js";

interface StreamedStatus {
  gateway_state: string;
  draining: boolean;
  sessions: { total: number; resume_pending: number };
}

/** Reads `data:` events of an SSE response one at a time. */
function sseReader(res: Response) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    async next(): Promise<StreamedStatus> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const data = event
            .split("\n")
            .filter((line) => line.startsWith("data:"))
            .map((line) => line.slice(5).trim())
            .join("\n");
          if (data) return JSON.parse(data) as StreamedStatus;
          continue;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error("stream ended");
        buffer += value;
      }
    },
    cancel: () => reader.cancel(),
  };
}

describe("the live status stream", () => {
  let dir: ReturnType<typeof createTempDir>;
  let gw: InProcessGateway;

  beforeEach(async () => {
    dir = createTempDir();
    gw = await startInProcessGateway({ home: dir.path });
  });
  afterEach(async () => {
    await gw.shutdown();
    dir.cleanup();
  });

  const open = async () => {
    const res = await fetch(`${gw.url}/api/status/stream`, {
      headers: { authorization: `Bearer ${gw.controlToken}` },
    });
    expect(res.status).toBe(200);
    return sseReader(res);
  };

  it("gives each client the status, then pushes a change to all of them", async () => {
    const first = await open();
    const second = await open();
    expect((await first.next()).gateway_state).toBe("running");
    expect((await second.next()).gateway_state).toBe("running");

    const drain = await fetch(`${gw.url}/api/gateway/drain`, {
      method: "POST",
      headers: { authorization: `Bearer ${gw.controlToken}`, "content-type": "application/json" },
      body: JSON.stringify({ action: "drain" }),
    });
    expect(drain.status).toBe(200);

    // Each client sees the drain (possibly after a status computed before it landed).
    for (const client of [first, second]) {
      let status = await client.next();
      while (!status.draining) status = await client.next();
      expect(status.gateway_state).toBe("draining");
      await client.cancel();
    }
  });

  it("counts the sessions in the pushed status", async () => {
    await gw.send("hello", "7");
    const client = await open();
    const status = await client.next();
    expect(status.sessions.total).toBeGreaterThanOrEqual(1);
    await client.cancel();
  });
});
