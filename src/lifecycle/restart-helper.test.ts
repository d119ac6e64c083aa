import { spawn } from "node:child_process";
import { access, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Sleeper, spawnSleeper } from "../../test/helpers/sleeper.js";
import { waitFor } from "../../test/helpers/wait-for.js";
import { spawnDetachedSuccessor } from "./restart-helper.js";

// Written whole, then renamed: the test reads the file as soon as it exists (once, under CI load,
// before its content was written).
const SUCCESSOR_SCRIPT = `
import { renameSync, writeFileSync } from "node:fs";
const [outFile, oldPid, ...rest] = process.argv.slice(2);
let oldAlive = true;
try { process.kill(Number(oldPid), 0); } catch { oldAlive = false; }
writeFileSync(outFile + ".tmp", JSON.stringify({ pid: process.pid, args: rest, oldAlive }));
renameSync(outFile + ".tmp", outFile);
`;

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

describe("detached restart successor", () => {
  let dir: string;
  const sleepers: Sleeper[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "keel-restart-"));
    await writeFile(join(dir, "successor.mjs"), SUCCESSOR_SCRIPT);
  });

  afterEach(async () => {
    for (const sleeper of sleepers.splice(0)) await sleeper.kill();
    await rm(dir, { recursive: true, force: true });
  });

  it("starts the successor only after the old gateway has exited", async () => {
    const old = await spawnSleeper(["keel", "gateway", "run"]);
    sleepers.push(old);
    const outFile = join(dir, "started.json");
    spawnDetachedSuccessor({
      nodePath: process.execPath,
      entry: join(dir, "successor.mjs"),
      args: [outFile, String(old.pid), "gateway", "run"],
      waitForPid: old.pid,
      logFile: join(dir, "logs", "gateway.log"),
    });
    await new Promise((r) => setTimeout(r, 600));
    expect(await exists(outFile)).toBe(false);

    await old.kill("SIGTERM");
    await waitFor(() => exists(outFile), { timeoutMs: 30_000 });
    const started = JSON.parse(await readFile(outFile, "utf8"));
    expect(started.args).toEqual(["gateway", "run"]);
    expect(started.oldAlive).toBe(false);
    expect(await readFile(join(dir, "logs", "gateway.log"), "utf8")).toContain("successor started");
  });

  it("survives the old gateway's whole process group being killed", async () => {
    const outFile = join(dir, "started.json");
    const modulePath = resolve("src/lifecycle/restart-helper.ts");
    const parentCode = `
      import { spawnDetachedSuccessor } from ${JSON.stringify(modulePath)};
      spawnDetachedSuccessor({
        nodePath: process.execPath,
        entry: ${JSON.stringify(join(dir, "successor.mjs"))},
        args: [${JSON.stringify(outFile)}, String(process.pid), "gateway", "run"],
        waitForPid: process.pid,
        logFile: ${JSON.stringify(join(dir, "gateway.log"))},
      });
      process.stdout.write("launched\\n");
      setInterval(() => {}, 1e6);
    `;
    const parent = spawn(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", parentCode],
      {
        detached: true,
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    let output = "";
    parent.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    await waitFor(() => output.includes("launched"), { timeoutMs: 20_000 });
    expect(await exists(outFile)).toBe(false);

    const exited = new Promise((r) => parent.once("exit", r));
    process.kill(-(parent.pid as number), "SIGKILL");
    await exited;
    // The successor may be mid-write when the file appears: wait for all of it.
    const written = async () => {
      try {
        return JSON.parse(await readFile(outFile, "utf8")) as { oldAlive: boolean };
      } catch {
        return null;
      }
    };
    const started = await waitFor(written, { timeoutMs: 30_000 });
    expect(started.oldAlive).toBe(false);
  });
});
