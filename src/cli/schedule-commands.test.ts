import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { runCli } from "./cli.js";
import type { CliIo } from "./io.js";

describe("keel schedule", () => {
  let home: ReturnType<typeof createTempDir>;
  let out: string[];
  let err: string[];
  const io = (): CliIo => ({
    out: (line) => out.push(line),
    err: (line) => err.push(line),
    env: {},
    stdin: new PassThrough(),
    write: (text) => out.push(text),
    onSignal: () => () => {},
  });
  const keel = (...args: string[]) => runCli(["--home", home.path, "schedule", ...args], io());

  beforeEach(() => {
    home = createTempDir("keel-cli-");
    out = [];
    err = [];
  });
  afterEach(() => home.cleanup());

  it("adds, lists, pauses, resumes and deletes a task", async () => {
    expect(
      await keel(
        "add",
        "daily",
        "--cron",
        "0 8 * * *",
        "--tz",
        "Europe/Berlin",
        "--prompt",
        "sum up",
        "--chat",
        "telegram:-1001:7",
      ),
    ).toBe(0);
    expect(out.at(-1)).toMatch(
      /^Added daily: cron "0 8 \* \* \*" \(Europe\/Berlin\), active, next .*; reports to telegram:-1001:7; misfire once$/,
    );
    expect(await keel("pause", "daily")).toBe(0);
    expect(out.at(-1)).toMatch(/paused \(paused by hand\)/);
    expect(await keel("resume", "daily")).toBe(0);
    expect(await keel("list", "--json")).toBe(0);
    expect(JSON.parse(out.at(-1)!)).toMatchObject([
      { name: "daily", kind: "cron", tz: "Europe/Berlin", chat: "telegram:-1001:7", paused: false },
    ]);
    expect(await keel("delete", "daily")).toBe(0);
    expect(out.at(-1)).toBe("Deleted daily.");
    expect(await keel("list")).toBe(0);
    expect(out.at(-1)).toBe("No scheduled tasks.");
  });

  it("refuses bad input with exit 2 and a message saying what to write; unknown names exit 1", async () => {
    expect(await keel("add", "x", "--every", "soon", "--prompt", "p")).toBe(2);
    expect(err.at(-1)).toMatch(/Invalid duration "soon": write a whole number and a unit/);
    expect(await keel("add", "x", "--every", "5m", "--at", "+1h", "--prompt", "p")).toBe(2);
    expect(err.at(-1)).toMatch(/exactly one of --cron/);
    expect(await keel("add", "x", "--every", "5m", "--prompt", "p", "--misfire", "later")).toBe(2);
    expect(err.at(-1)).toMatch(/once, skip or all/);
    expect(await keel("add", "x", "--every", "5m", "--prompt", "p", "--chat", "4242")).toBe(2);
    expect(err.at(-1)).toMatch(/PLATFORM:CHAT_ID/);
    expect(await keel("add", "bad name", "--every", "5m", "--prompt", "p")).toBe(2);
    expect(await keel("add", "x", "--every", "5m")).toBe(2); // --prompt is required
    expect(await keel("add", "x", "--every", "5m", "--prompt", "p")).toBe(0);
    expect(await keel("add", "x", "--every", "5m", "--prompt", "p")).toBe(2);
    expect(err.at(-1)).toBe('A schedule named "x" already exists.');
    expect(await keel("pause", "nope")).toBe(1);
    expect(err.at(-1)).toMatch(/No scheduled task named nope/);
  });
});
