/**
 * `keel open`: prints the browser login link and opens it where a browser is available. The
 * browser is given a redirect file in the Keel home (mode 0600) rather than the link itself,
 * because a program's arguments are visible to every local user (`ps`) and the link carries the
 * control token — Jupyter does the same. Never fails for want of a browser.
 */
import { spawn } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { findOwnGateway, loginLink, unconfirmedText } from "./gateway-probe.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForControl } from "./load.js";

export interface OpenOptions extends GlobalOptions {
  /** `--no-browser`: only print the link. */
  browser?: boolean;
}

export async function open(options: OpenOptions, io: CliIo): Promise<number> {
  const { config } = await loadForControl(options, io);
  if (config.controlToken === "") {
    io.err(
      `keel: no control token to log in with: ${config.home}/control_token is missing and KEEL_CONTROL_TOKEN is not set.`,
    );
    return EXIT.failure;
  }
  const link = loginLink(config.http, config.controlToken);
  io.out(link);
  // The link logs in only to this home's gateway (its control token): say when that is not
  // the one at the address.
  const own = await findOwnGateway(config);
  if (own.state === "not_running") {
    io.err("(this home's gateway is not running: start it with `keel gateway start`)");
  } else if (own.state === "unconfirmed") {
    io.err(`(${unconfirmedText(own, config.http)})`);
  }
  if (options.browser === false) return EXIT.ok;
  const opener = browserOpener(process.platform, io.env);
  if (!opener) {
    io.err("(no browser to open here: open the link above in yours)");
    return EXIT.ok;
  }
  const file = join(config.home, "login.html");
  writeFileSync(file, redirectPage(link), { mode: 0o600 });
  chmodSync(file, 0o600);
  try {
    const child = spawn(opener, [file], { detached: true, stdio: "ignore" });
    child.on("error", () => io.err(`(could not run ${opener}: open the link above yourself)`));
    child.unref();
  } catch {
    io.err(`(could not run ${opener}: open the link above yourself)`);
  }
  return EXIT.ok;
}

/** The program that opens a file in the desktop's browser, or null without a desktop. */
export function browserOpener(
  platform: NodeJS.Platform,
  env: Readonly<Record<string, string | undefined>>,
): string | null {
  if (platform === "darwin") return "open";
  if (platform === "win32") return null;
  return env.DISPLAY || env.WAYLAND_DISPLAY ? "xdg-open" : null;
}

function redirectPage(link: string): string {
  const escaped = link.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  return `<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=${escaped}">
<title>Keel login</title></head>
<body><p><a href="${escaped}">Open Keel</a></p></body></html>
`;
}
