/** Times as Keel writes them (control API JSON, `--json`, CLI lines): ISO 8601 UTC, null kept. */
export function isoTime(ms: number): string;
export function isoTime(ms: number | null): string | null;
export function isoTime(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
