/**
 * The process's exit codes (docs/operations.md, "Exit codes"), the one table: the CLI returns
 * them, the gateway's stop maps its outcome to them (lifecycle/exit-code.ts), the service files
 * name them.
 */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  /** EX_TEMPFAIL: "restart me" for launchd, containers, and systemd's fallback. */
  restart: 75,
  /** EX_CONFIG: do not restart, fix the configuration. */
  config: 78,
} as const;
