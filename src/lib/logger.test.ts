import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { formatLogLine } from "./log-format.js";
import { createLogger } from "./logger.js";

let dir: ReturnType<typeof createTempDir>;
beforeEach(() => {
  dir = createTempDir();
});
afterEach(() => dir.cleanup());

describe("logs on a terminal", () => {
  it("are human-readable on stderr while the file keeps JSON lines", () => {
    const shown: string[] = [];
    const file = join(dir.path, "logs", "gateway.log");
    const logger = createLogger({
      level: "info",
      file,
      stderr: true,
      pretty: true,
      prettyOut: { write: (text: string) => shown.push(text) },
    });
    logger
      .child({ component: "outbox" })
      .warn({ outboxId: 3, err: new Error("hang up") }, "delivery failed");
    logger.flush();
    expect(shown).toHaveLength(1);
    expect(shown[0]).toMatch(
      /^\d\d:\d\d:\d\d WARN {2}outbox: delivery failed {2}outboxId=3 err="hang up"\n$/,
    );
    const json = JSON.parse(readFileSync(file, "utf8").trim()) as Record<string, unknown>;
    expect(json).toMatchObject({
      level: 40,
      msg: "delivery failed",
      outboxId: 3,
      component: "outbox",
    });
  });

  it("a line that is not JSON passes through unchanged", () => {
    expect(formatLogLine("plain text")).toBe("plain text\n");
  });
});

describe("credentials inside URLs", () => {
  it("are masked in every log line, whatever field carries them", () => {
    const shown: string[] = [];
    const file = join(dir.path, "logs", "gateway.log");
    const logger = createLogger({
      level: "info",
      file,
      stderr: true,
      pretty: true,
      prettyOut: { write: (text: string) => shown.push(text) },
    });
    const err = new Error("fetch to https://bot:hunter2@proxy.example/api failed");
    logger.warn({ err, target: "postgres://keel:pg-secret@db/keel" }, "request failed");
    logger.flush();
    const written = `${readFileSync(file, "utf8")}${shown.join("")}`;
    expect(written).not.toContain("hunter2");
    expect(written).not.toContain("pg-secret");
    expect(written).toContain("https://bot:***@proxy.example/api");
    expect(written).toContain("postgres://keel:***@db/keel");
  });
});
