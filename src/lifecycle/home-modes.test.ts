import { chmodSync, mkdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTempDir } from "../../test/helpers/temp-home.js";
import { describeModeFix, enforceHomeModes } from "./home-modes.js";

let dir: ReturnType<typeof createTempDir>;
let home: string;

beforeEach(() => {
  dir = createTempDir();
  home = join(dir.path, "home");
  mkdirSync(join(home, "logs"), { recursive: true });
});
afterEach(() => dir.cleanup());

const mode = (path: string) => statSync(path).mode & 0o777;

describe("enforceHomeModes", () => {
  it("tightens the home, the private files and logs/, and reports each change", () => {
    chmodSync(home, 0o755);
    chmodSync(join(home, "logs"), 0o775);
    writeFileSync(join(home, "state.db-wal"), "", { mode: 0o664 });
    writeFileSync(join(home, "logs", "gateway.out.log"), "", { mode: 0o644 });
    chmodSync(join(home, "state.db-wal"), 0o664);
    chmodSync(join(home, "logs", "gateway.out.log"), 0o644);
    const fixes = enforceHomeModes(home);
    expect(fixes.map((f) => [f.path, f.was, f.now])).toEqual([
      [home, 0o755, 0o700],
      [join(home, "state.db-wal"), 0o664, 0o600],
      [join(home, "logs"), 0o775, 0o700],
      [join(home, "logs", "gateway.out.log"), 0o644, 0o600],
    ]);
    expect(mode(home)).toBe(0o700);
    expect(mode(join(home, "logs", "gateway.out.log"))).toBe(0o600);
    expect(describeModeFix(fixes[0]!)).toBe(
      `${home} was open to other users (mode 0755); changed to 0700`,
    );
    expect(enforceHomeModes(home)).toEqual([]);
  });

  it("keeps tighter modes, skips missing files and leaves symlinks (and their targets) alone", () => {
    chmodSync(home, 0o700);
    chmodSync(join(home, "logs"), 0o500);
    writeFileSync(join(home, "control_token"), "t", { mode: 0o400 });
    const outside = join(dir.path, "shared.yaml");
    writeFileSync(outside, "", { mode: 0o644 });
    chmodSync(outside, 0o644);
    symlinkSync(outside, join(home, "config.yaml"));
    expect(enforceHomeModes(home)).toEqual([]);
    expect(mode(join(home, "control_token"))).toBe(0o400);
    expect(mode(outside)).toBe(0o644);
  });
});
