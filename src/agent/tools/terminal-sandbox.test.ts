/**
 * The terminal tool inside the bubblewrap sandbox (`tools.sandbox`), with the real `bwrap`: what
 * a command can and cannot touch, and that nothing it starts outlives it. These need bubblewrap
 * installed (`.ci/run` installs it); as root, one case runs bwrap as an unprivileged user.
 */
import { randomInt } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { resolveSandbox, type SandboxOptions, type SandboxState } from "../sandbox/sandbox.js";
import { createProcessRegistry, type ProcessRegistry } from "./process-registry.js";
import { createTerminalTool } from "./terminal.js";
import type { ToolOutput } from "./tool.js";

const TOOL_ENV = { PATH: process.env.PATH ?? "/usr/bin:/bin" };

/** A sleep length no other process on the machine uses, to find a test's sleeps in /proc. */
const uniqueSeconds = String(6_000_000 + randomInt(1_000_000));

let root: string;
let home: string;
let workspace: string;
let outside: string;
let processes: ProcessRegistry;

/**
 * Not under /tmp, which the sandbox replaces with its own: the folders outside the workspace must
 * be there, read-only, and the home hidden by its own mount, not by the private /tmp.
 */
const BASE = existsSync("/var/tmp") ? "/var/tmp" : tmpdir();

beforeEach(() => {
  root = mkdtempSync(join(BASE, "keel-sandbox-"));
  home = join(root, "home");
  workspace = join(home, "workspace");
  outside = join(root, "outside");
  mkdirSync(workspace, { recursive: true });
  mkdirSync(outside);
  writeFileSync(join(outside, "keep.txt"), "precious\n");
  writeFileSync(join(home, "control_token"), "secret-token-0123456789\n", { mode: 0o600 });
  writeFileSync(join(home, "state.db"), "SQLite format 3\0secret rows", { mode: 0o600 });
  processes = createProcessRegistry();
});

afterEach(() => {
  processes.killAll();
  for (const pid of pidsWithArgument(uniqueSeconds)) process.kill(pid, "SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

function sandboxState(options: Partial<SandboxOptions> = {}): SandboxState {
  return resolveSandbox({
    setting: "auto",
    program: "bwrap",
    pathVariable: TOOL_ENV.PATH,
    home,
    workspace,
    writable: [],
    network: true,
    ...options,
  });
}

async function run(
  command: string,
  state: SandboxState = sandboxState(),
  extra: Record<string, unknown> = {},
): Promise<ToolOutput> {
  const tool = createTerminalTool({
    defaultTimeoutMs: 30_000,
    processes,
    env: TOOL_ENV,
    sandbox: state,
  });
  return tool.execute(
    { command, ...extra },
    { cwd: workspace, signal: new AbortController().signal },
  );
}

/** Live (non-zombie) processes whose command line has `argument`, from /proc. */
function pidsWithArgument(argument: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's cmdline is empty, so only live processes match.
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").includes(argument)) {
        pids.push(Number(entry));
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

describe("the terminal tool in the sandbox", () => {
  it("`auto` finds bubblewrap here and runs in the sandbox", () => {
    const state = sandboxState();
    expect(state.mode).toBe("workspace");
  });

  it("a write or a delete outside the workspace fails, the file and folder outside survive, and the result says how to step outside", async () => {
    const result = await run(
      `echo attacker > '${join(outside, "keep.txt")}'; rm -rf '${outside}'; touch '${join(root, "new.txt")}'`,
    );
    expect(result.isError).toBe(true);
    expect(result.output).toMatch(/Read-only file system/);
    expect(result.output).toContain('"sandbox": false');
    expect(readFileSync(join(outside, "keep.txt"), "utf8")).toBe("precious\n");
    expect(existsSync(join(root, "new.txt"))).toBe(false);
  });

  it("the Keel home is hidden (control_token, state.db) while the workspace is writable", async () => {
    const result = await run(
      `cat ../control_token; cat '${join(home, "state.db")}'; ls -A '${home}'; echo made > made.txt && echo wrote`,
    );
    expect(result.output).not.toContain("secret-token");
    expect(result.output).not.toContain("secret rows");
    expect(result.output).toMatch(/control_token: No such file or directory/);
    expect(result.output).toContain("wrote");
    expect(readFileSync(join(workspace, "made.txt"), "utf8")).toBe("made\n");
    // The home's listing inside shows the workspace bound back, nothing else.
    expect(result.output).toMatch(/^workspace$/m);
  });

  it("/tmp is private: the host's /tmp files are not there, and what a command leaves there is gone", async () => {
    const hostFile = join("/tmp", `keel-sandbox-host-${uniqueSeconds}`);
    const leftFile = join("/tmp", `keel-sandbox-left-${uniqueSeconds}`);
    writeFileSync(hostFile, "host\n");
    try {
      const result = await run(`cat '${hostFile}'; echo inside > '${leftFile}'`);
      expect(result.output).toMatch(/No such file or directory/);
      expect(readFileSync(hostFile, "utf8")).toBe("host\n");
      expect(existsSync(leftFile)).toBe(false);
    } finally {
      rmSync(hostFile, { force: true });
      rmSync(leftFile, { force: true });
    }
  });

  it("a descendant started with setsid or nohup … & is dead once the command returns", async () => {
    const result = await run(
      `setsid sleep ${uniqueSeconds} & nohup sleep ${uniqueSeconds} >/dev/null 2>&1 & (sleep ${uniqueSeconds} &); echo started`,
    );
    expect(result.output).toContain("started");
    expect(result.output).toContain("[exit code 0]");
    expect(pidsWithArgument(uniqueSeconds)).toEqual([]);
  });

  it("a timeout still kills the command and everything it started", async () => {
    const tool = createTerminalTool({
      defaultTimeoutMs: 30_000,
      processes,
      env: TOOL_ENV,
      sandbox: sandboxState(),
      killGraceMs: 200,
    });
    const result = await tool.execute(
      {
        command: `trap '' TERM; setsid sleep ${uniqueSeconds} & sleep ${uniqueSeconds}`,
        timeout: 0.5,
      },
      { cwd: workspace, signal: new AbortController().signal },
    );
    expect(result.output).toContain("[killed: timed out after 0.5 s]");
    expect(pidsWithArgument(uniqueSeconds)).toEqual([]);
  });

  describe("the network switch (a server on the host's 127.0.0.1)", () => {
    let server: Server;
    let port: number;
    beforeEach(async () => {
      server = createServer((socket) => socket.end("hello from the host\n"));
      await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
      port = (server.address() as { port: number }).port;
    });
    afterEach(() => new Promise<void>((done) => server.close(() => done())));

    // bash's /dev/tcp rather than this test's own Node: the Node running the tests may live under
    // /tmp (CI's Node 24 does), which the sandbox replaces with an empty one.
    const connect = () => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3'`;

    it("sandbox_network: true reaches it", async () => {
      const result = await run(connect(), sandboxState({ network: true }));
      expect(result.output).toContain("hello from the host");
      expect(result.isError).toBe(false);
    });

    it("sandbox_network: false blocks it, and the result says how to step outside", async () => {
      const result = await run(connect(), sandboxState({ network: false }));
      expect(result.output).not.toContain("hello from the host");
      expect(result.output).toContain("Connection refused");
      expect(result.output).toContain("no network");
      expect(result.output).toContain('"sandbox": false');
    });
  });

  it("tools.sandbox_writable opens a path outside the workspace, and only that one", async () => {
    const open = join(root, "open");
    mkdirSync(open);
    const state = sandboxState({ writable: [open] });
    const result = await run(
      `echo yes > '${join(open, "note.txt")}' && echo wrote; echo no > '${join(outside, "note.txt")}'`,
      state,
    );
    expect(result.output).toContain("wrote");
    expect(readFileSync(join(open, "note.txt"), "utf8")).toBe("yes\n");
    expect(existsSync(join(outside, "note.txt"))).toBe(false);
  });

  it("a writable path that holds the home (as ~ would) does not uncover it", async () => {
    const state = sandboxState({ writable: [root] });
    const result = await run(
      `cat ../control_token; ls -A '${home}'; echo yes > '${join(root, "beside.txt")}' && echo wrote`,
      state,
    );
    expect(result.output).not.toContain("secret-token");
    expect(result.output).not.toMatch(/^state\.db$/m);
    expect(result.output).toContain("wrote");
    expect(readFileSync(join(root, "beside.txt"), "utf8")).toBe("yes\n");
  });

  it('"sandbox": false runs unconfined (the approval gate asks first; see policy tests)', async () => {
    const result = await run(`echo out > '${join(outside, "note.txt")}' && echo wrote`, undefined, {
      sandbox: false,
    });
    expect(result.output).toContain("wrote");
    expect(readFileSync(join(outside, "note.txt"), "utf8")).toBe("out\n");
  });

  it("`auto` falls back to no sandbox, with a warning, when bubblewrap is missing", async () => {
    const state = sandboxState({ program: join(root, "no-such-bwrap") });
    expect(state.mode).toBe("off");
    expect(state.mode === "off" && state.warning).toMatch(/bubblewrap is not usable .*not found/);
    const result = await run(`echo out > '${join(outside, "note.txt")}' && echo wrote`, state);
    expect(result.output).toContain("wrote");
  });

  it("`workspace` with bubblewrap missing refuses commands instead of running them unconfined", async () => {
    const state = sandboxState({ setting: "workspace", program: join(root, "no-such-bwrap") });
    expect(state.mode).toBe("failed");
    const result = await run(`echo out > '${join(outside, "note.txt")}'`, state);
    expect(result.isError).toBe(true);
    expect(result.output).toMatch(/^Not run: tools\.sandbox is workspace but bubblewrap/);
    expect(existsSync(join(outside, "note.txt"))).toBe(false);
  });

  it("works for an unprivileged user too (bwrap run as uid 65534 when the tests run as root)", async () => {
    let program = "bwrap";
    if (process.getuid?.() === 0) {
      // The same seam as KEEL_BWRAP: a bwrap that drops to nobody before it starts.
      program = join(root, "bwrap-as-nobody");
      writeFileSync(
        program,
        '#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups bwrap "$@"\n',
        { mode: 0o755 },
      );
      for (const dir of [root, home]) chmodSync(dir, 0o755);
      chmodSync(workspace, 0o777);
    }
    const state = sandboxState({ program });
    expect(state.mode).toBe("workspace");
    const result = await run(
      `id -u; echo mine > mine.txt && echo wrote; echo no > '${join(outside, "x")}'; cat ../control_token; setsid sleep ${uniqueSeconds} &`,
      state,
    );
    if (process.getuid?.() === 0) expect(result.output).toMatch(/^65534$/m);
    expect(result.output).toContain("wrote");
    expect(readFileSync(join(workspace, "mine.txt"), "utf8")).toBe("mine\n");
    expect(result.output).toMatch(/Read-only file system/);
    expect(result.output).not.toContain("secret-token");
    expect(existsSync(join(outside, "x"))).toBe(false);
    expect(pidsWithArgument(uniqueSeconds)).toEqual([]);
  });
});
