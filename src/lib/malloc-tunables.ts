/**
 * glibc malloc settings for the gateways Keel starts itself (service unit, `keel gateway start`,
 * a restart's successor, the Docker image).
 *
 * glibc raises its trim threshold each time a large block is freed, up to 64 MB, so after a busy
 * spell the arenas of the main thread and of V8's worker threads keep tens of MB that nothing
 * uses; a fixed threshold hands the free top of each arena back to the system as it goes.
 * Measured on a settled gateway after 10,000 turns (docs/operations.md, Memory): the worker
 * threads' arenas hold ~1.7 MB instead of ~15, the RSS kept drops by a few MB (holes below memory
 * in use stay), latency and throughput move only with the machine's noise.
 *
 * glibc reads these once, as the process starts, so they go into the environment of a process
 * about to be spawned; JavaScript cannot set them for the process it runs in. Other C libraries
 * (musl, macOS) ignore the variable.
 */

/**
 * 128 KiB: glibc's own starting value, kept fixed instead of raised. Setting it also keeps the
 * mmap threshold at its starting 128 KiB (glibc raises both together or neither).
 */
const TUNABLES = { "glibc.malloc.trim_threshold": "131072" } as const;

/**
 * `env` with Keel's malloc tunables added to `GLIBC_TUNABLES`; a tunable the variable already
 * sets is left as the operator set it. Pure.
 */
export function withMallocTunables<V extends string | undefined>(
  env: Record<string, V>,
): Record<string, V | string> {
  const existing = env.GLIBC_TUNABLES ?? "";
  const given = new Set(
    existing
      .split(":")
      .map((pair) => pair.split("=")[0])
      .filter(Boolean),
  );
  const added = Object.entries(TUNABLES)
    .filter(([name]) => !given.has(name))
    .map(([name, value]) => `${name}=${value}`);
  if (added.length === 0) return env;
  return { ...env, GLIBC_TUNABLES: [existing, ...added].filter(Boolean).join(":") };
}

/** The variable as {@link withMallocTunables} writes it into an empty environment. */
export const MALLOC_TUNABLES_VALUE = withMallocTunables({}).GLIBC_TUNABLES!;
