/**
 * Keeps the file tools out of the Keel home: it holds `control_token`, `config.yaml`,
 * `state.db` and the logs, which a prompt injection would like to read or rewrite. Only the
 * workspace inside it is open. Paths are compared after resolving `..` and every symlink, so
 * `workspace/../control_token` and a link in the workspace pointing at `state.db` are refused
 * alike. (The terminal tool is a shell and is not guarded: the OS user is its boundary.)
 */
import { lstat, readlink, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";

export interface HomeGuard {
  /**
   * Resolves `path` (relative to `cwd`) to its real location; `refusal` is the message for the
   * model when it lies inside the home but outside the workspace. A missing file resolves as
   * far as its folders exist.
   */
  check(cwd: string, path: string): Promise<{ realPath: string; refusal?: string }>;
}

/** Symlinks followed at most while resolving one path (as the kernel's ELOOP limit). */
const MAX_LINKS = 40;

/** Creates the guard for a home folder whose `workspace/` stays open to the tools. */
export function createHomeGuard(home: string, workspace = join(home, "workspace")): HomeGuard {
  let roots: Promise<{ home: string; workspace: string }> | undefined;
  return {
    async check(cwd, path) {
      roots ??= Promise.all([resolveReal(home), resolveReal(workspace)]).then(([h, w]) => ({
        home: h,
        workspace: w,
      }));
      const real = await resolveReal(resolve(cwd, path));
      const { home: realHome, workspace: realWorkspace } = await roots;
      // The workspace opens only what lies below the home: a workspace/ replaced by a link to
      // the home itself (or above it) would otherwise open the whole home.
      const workspaceOpen = realWorkspace !== realHome && !isInside(realHome, realWorkspace);
      if (!isInside(real, realHome) || (workspaceOpen && isInside(real, realWorkspace)))
        return { realPath: real };
      return {
        realPath: real,
        refusal:
          `Refused: ${path} is inside the Keel home (${realHome}), which holds the gateway's ` +
          `secrets and state. The file tools may use ${realWorkspace} and anything outside the home.`,
      };
    },
  };
}

function isInside(path: string, folder: string): boolean {
  const rel = relative(folder, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * The real path of `path`, which need not exist: the longest existing prefix is resolved by the
 * system (symlinks included, dangling ones followed by hand) and the rest appended.
 */
export async function resolveReal(path: string, linksLeft = MAX_LINKS): Promise<string> {
  try {
    return await realpath(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
  }
  const parent = dirname(path);
  if (parent === path) return path;
  const realParent = await resolveReal(parent, linksLeft);
  const candidate = join(realParent, basename(path));
  // A dangling symlink: follow it, since writing through it would create its target.
  const info = await lstat(candidate).catch(() => null);
  if (info?.isSymbolicLink()) {
    if (linksLeft <= 0) {
      throw Object.assign(new Error(`too many symlinks: ${path}`), { code: "ELOOP" });
    }
    return resolveReal(resolve(realParent, await readlink(candidate)), linksLeft - 1);
  }
  return candidate;
}
