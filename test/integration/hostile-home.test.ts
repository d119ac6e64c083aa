/**
 * A Keel home someone else could have filled (issue 33, docs/security.md): `keel gateway run`
 * and `keel doctor` stop with exit 78 naming the path and the command that fixes it, before
 * reading anything in the home, and a `control_token` this user did not write privately is never
 * adopted. "Another user" is `nobody`, which needs root to arrange; those cases are skipped
 * otherwise.
 */
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCliInProcess } from "../helpers/cli-run.js";
import { createTempDir } from "../helpers/temp-home.js";

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const PLANTED = "planted-token-0123456789abcdef";

let dir: ReturnType<typeof createTempDir>;
afterEach(() => dir?.cleanup());

/** A home prepared by `prepare`, with a planted token and a config that must never be read. */
function hostileHome(prepare: (home: string) => void): string {
  dir = createTempDir("keel-hostile-");
  const home = join(dir.path, "home");
  mkdirSync(home, { mode: 0o700 });
  writeFileSync(join(home, "control_token"), `${PLANTED}\n`, { mode: 0o600 });
  prepare(home);
  return home;
}

async function run(args: string[], home: string) {
  return runCliInProcess([...args, "--home", home], { env: { KEEL_HTTP_PORT: "0" } });
}

describe("a home that is not this user's alone", () => {
  it("refuses a home writable by others (0777): exit 78 with the chmod to run", async () => {
    const home = hostileHome((h) => chmodSync(h, 0o777));
    const result = await run(["gateway", "run"], home);
    expect(result.code).toBe(78);
    expect(result.text).toContain(`${home} (the Keel home) is writable by its group and others`);
    expect(result.text).toContain(`chmod 700 ${home}`);
    // Refused, not tightened: nothing in the home was adopted or changed.
    expect(readFileSync(join(home, "control_token"), "utf8").trim()).toBe(PLANTED);
    expect(existsSync(join(home, "state.db"))).toBe(false);
  });

  it("refuses a home below a folder others may write to, but not below a sticky one like /tmp", async () => {
    const home = hostileHome(() => {});
    chmodSync(dir.path, 0o777);
    const open = await run(["gateway", "run"], home);
    expect(open.code).toBe(78);
    expect(open.text).toContain(`chmod go-w ${dir.path}`);
    chmodSync(dir.path, 0o1777);
    const doctor = await run(["doctor"], home);
    expect(doctor.text).not.toContain("✗ home");
  });

  it.skipIf(!asRoot)(
    "refuses a home owned by another user, planted control_token and all",
    async () => {
      const home = hostileHome((h) => {
        chmodSync(h, 0o777);
        chownSync(h, NOBODY, NOBODY);
        chownSync(join(h, "control_token"), NOBODY, NOBODY);
      });
      const result = await run(["gateway", "run"], home);
      expect(result.code).toBe(78);
      expect(result.text).toContain(`${home} (the Keel home) belongs to user ${NOBODY}`);
      expect(result.text).toContain(`chown -R`);
      expect(result.text).not.toContain(PLANTED);
    },
  );

  it("keel doctor reports the home as ✗ and exits 78", async () => {
    const home = hostileHome((h) => chmodSync(h, 0o770));
    const result = await run(["doctor"], home);
    expect(result.code).toBe(78);
    expect(result.out.join("\n")).toContain(
      `✗ home: ${home} (the Keel home) is writable by its group`,
    );
  });
});

describe("a control_token this user did not write privately", () => {
  it("is not adopted when its group may write it: exit 78 with the fix", async () => {
    const home = hostileHome((h) => chmodSync(join(h, "control_token"), 0o660));
    const result = await run(["gateway", "run"], home);
    expect(result.code).toBe(78);
    expect(result.text).toContain(
      `${join(home, "control_token")} is open to its group (mode 0660)`,
    );
    expect(result.text).toContain(`rm ${join(home, "control_token")}`);
    expect(result.text).not.toContain(PLANTED);
  });

  it("is not adopted when it is a link to somewhere else", async () => {
    const home = hostileHome((h) => {
      writeFileSync(join(dir.path, "elsewhere"), `${PLANTED}\n`, { mode: 0o600 });
      const token = join(h, "control_token");
      rmSync(token);
      symlinkSync(join(dir.path, "elsewhere"), token);
    });
    const result = await run(["gateway", "run"], home);
    expect(result.code).toBe(78);
    expect(result.text).toContain("is not a regular file");
  });

  it.skipIf(!asRoot)("is not adopted when another user owns it, even at 0600", async () => {
    const home = hostileHome((h) => chownSync(join(h, "control_token"), NOBODY, NOBODY));
    const result = await run(["gateway", "run"], home);
    expect(result.code).toBe(78);
    expect(result.text).toContain(`belongs to user ${NOBODY}`);
  });

  it("is adopted when it is this user's private file (the doctor passes the home)", async () => {
    const home = hostileHome(() => {});
    const result = await run(["doctor"], home);
    expect(result.out.join("\n")).toContain(`✓ home: ${home}`);
  });
});
