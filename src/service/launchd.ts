/** launchd agent rendering (pure). */
import { join } from "node:path";
import { escapeEach } from "../lib/escape-each.js";
import { type ServiceSpec, serviceFileParts } from "./service-spec.js";

/** The job label, also the plist's file name (`ai.keel.gateway.plist`). */
export const LAUNCHD_LABEL = "ai.keel.gateway";

/** Seconds launchd waits before respawning (its own default is also 10). */
export const LAUNCHD_THROTTLE_SECONDS = 10;

const XML_ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
  // A literal CR would be normalised to LF by the parser; the reference keeps it.
  "\r": "&#13;",
};

/**
 * Escapes text for XML character data. Throws on characters XML 1.0 cannot carry at all
 * (control characters other than tab, newline and carriage return). Pure.
 */
export function escapeXml(text: string): string {
  return escapeEach(text, (ch, code) => {
    const entity = XML_ENTITIES[ch];
    if (entity !== undefined) return entity;
    if ((code < 0x20 && ch !== "\t" && ch !== "\n") || code === 0xfffe || code === 0xffff) {
      throw new Error(
        `Character U+${code.toString(16).padStart(4, "0")} cannot be written to a plist`,
      );
    }
    return ch;
  });
}

/** Where launchd sends the gateway's stdout and stderr (the gateway itself logs to `gateway.log`). */
export function launchdLogPaths(home: string): { stdout: string; stderr: string } {
  return {
    stdout: join(home, "logs", "gateway.out.log"),
    stderr: join(home, "logs", "gateway.err.log"),
  };
}

/**
 * Renders `ai.keel.gateway.plist`. `KeepAlive {SuccessfulExit: false}` respawns the gateway after
 * any non-zero exit (1 failure, 75 restart) and leaves it down after exit 0 (planned stop);
 * `ExitTimeOut` is {@link stopTimeoutFromDrain}. Every value is XML-escaped. launchd does not create
 * the log folder: the installer must. Pure; throws on relative paths or invalid environment names.
 */
export function renderLaunchdPlist(spec: ServiceSpec): string {
  const parts = serviceFileParts(spec);
  const str = (value: string, indent: string) => `${indent}<string>${escapeXml(value)}</string>`;
  const key = (name: string, indent = "  ") => `${indent}<key>${escapeXml(name)}</key>`;
  const logs = launchdLogPaths(spec.home);
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    "<dict>",
    key("Label"),
    str(LAUNCHD_LABEL, "  "),
    key("ProgramArguments"),
    "  <array>",
    ...parts.argv.map((arg) => str(arg, "    ")),
    "  </array>",
    key("EnvironmentVariables"),
    "  <dict>",
    ...parts.environment.flatMap(([name, value]) => [key(name, "    "), str(value, "    ")]),
    "  </dict>",
    key("RunAtLoad"),
    "  <true/>",
    key("KeepAlive"),
    "  <dict>",
    key("SuccessfulExit", "    "),
    "    <false/>",
    "  </dict>",
    key("ThrottleInterval"),
    `  <integer>${LAUNCHD_THROTTLE_SECONDS}</integer>`,
    key("ExitTimeOut"),
    `  <integer>${parts.stopTimeoutSeconds}</integer>`,
    key("StandardOutPath"),
    str(logs.stdout, "  "),
    key("StandardErrorPath"),
    str(logs.stderr, "  "),
    "</dict>",
    "</plist>",
    "",
  ].join("\n");
}
