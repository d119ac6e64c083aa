/**
 * The environment the agent's tools run with. The gateway's own environment holds its secrets
 * (model key, bot token, control token), and a tool's output lands in the transcript and goes to
 * the model, so tools get an allowlist instead: the basics a shell needs plus the names the
 * operator lists in `agent.env_passthrough`.
 */

/** Passed to every tool: what a shell and ordinary programs need to behave. */
const BASE_NAMES = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "TERM",
  "TZ",
  "TMPDIR",
]);

/**
 * The prefixes of Keel's own settings (model, bots, gateway): never passed to tools unless
 * listed; captured into an installed service's environment.
 */
export const KEEL_PREFIXES: readonly string[] = [
  "KEEL_",
  "OPENAI_",
  "TELEGRAM_",
  "SLACK_",
  "DISCORD_",
  "WHATSAPP_",
  "MATRIX_",
  "EMAIL_",
];

/** Names that look like credentials (case-insensitive): never passed unless listed. */
const SECRET_WORDS = ["TOKEN", "KEY", "SECRET", "PASSWORD"];

/**
 * Builds the tools' environment from the gateway's: PATH, HOME, USER, LOGNAME, SHELL, LANG,
 * LC_*, TERM, TZ, TMPDIR, plus every name in `passthrough`. A base name that is a Keel setting or
 * looks like a credential is still dropped; a name in `passthrough` always passes (it is the
 * operator's explicit choice). Pure; unset names are simply absent.
 */
export function buildToolEnv(
  env: Readonly<Record<string, string | undefined>>,
  passthrough: readonly string[],
): Record<string, string> {
  const listed = new Set(passthrough);
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) continue;
    if (listed.has(name) || (isBaseName(name) && !isSensitiveName(name))) out[name] = value;
  }
  return out;
}

function isBaseName(name: string): boolean {
  return BASE_NAMES.has(name) || name.startsWith("LC_");
}

/** True for Keel's own settings and for names that look like credentials. */
export function isSensitiveName(name: string): boolean {
  const upper = name.toUpperCase();
  return (
    KEEL_PREFIXES.some((prefix) => upper.startsWith(prefix)) ||
    SECRET_WORDS.some((word) => upper.includes(word))
  );
}
