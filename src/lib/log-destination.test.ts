import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { coalescingDestination } from "./log-destination.js";

let dir: ReturnType<typeof createTempDir>;
beforeEach(() => {
  dir = createTempDir();
});
afterEach(() => dir.cleanup());

/** A pino logger over a coalescing destination that records each write it is handed. */
function recorded() {
  const writes: string[] = [];
  const logger = pino(
    { base: null, timestamp: false },
    coalescingDestination({ write: (text: string) => writes.push(text) }),
  );
  const lines = () =>
    writes
      .join("")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).msg as string);
  return { logger, writes, lines };
}

describe("the coalescing log destination", () => {
  it("writes the info lines of one event-loop turn together, once the turn ends", async () => {
    const { logger, writes, lines } = recorded();
    logger.info("turn finished 1");
    logger.info("turn finished 2");
    logger.info("turn finished 3");
    expect(writes).toEqual([]);
    await nextTurn();
    expect(writes).toHaveLength(1);
    expect(lines()).toEqual(["turn finished 1", "turn finished 2", "turn finished 3"]);
  });

  it("writes a warning at once, after what waited before it", () => {
    const { logger, writes, lines } = recorded();
    logger.info("before");
    logger.warn("store unreachable");
    expect(writes).toHaveLength(1);
    logger.error("still unreachable");
    expect(writes).toHaveLength(2);
    expect(lines()).toEqual(["before", "store unreachable", "still unreachable"]);
  });

  it("writes what waits when the process exits right after logging it", () => {
    const file = join(dir.path, "gateway.log");
    const child = join(import.meta.dirname, "../../test/fixtures/log-then-exit.ts");
    const run = spawnSync(process.execPath, ["--import", "tsx", child, file], {
      encoding: "utf8",
    });
    expect(run.status).toBe(0);
    const msgs = readFileSync(file, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).msg);
    expect(msgs).toEqual(["gateway stopped"]);
  });
});
