/**
 * Each platform's row of `/api/status`: its connection health (`connected`, `reconnecting`,
 * `stalled`, `down`, `disabled`), why it is unavailable, and when it was last heard from. "Heard
 * from" is the later of the adapter's own sign of life (an answered poll, a heartbeat ACK) and the
 * last message it handed over, so a platform without a connection of its own still has an age.
 */

import type { ConnectionReport, PlatformStatus } from "../contract/platform.js";
import type { GatewayStatus } from "../control/control-surface.js";

export type PlatformRow = GatewayStatus["platforms"][string];

export function platformRows(
  statuses: Record<string, Pick<PlatformStatus, "error">>,
  connections: Record<string, ConnectionReport>,
  lastHandedOver: (name: string) => number | null,
  now: number,
): Record<string, PlatformRow> {
  return Object.fromEntries(
    Object.entries(statuses).map(([name, status]) => {
      const connection = connections[name];
      const heard = latest(connection?.lastEventAt ?? null, lastHandedOver(name));
      const row: PlatformRow = {
        state: connection?.state ?? "disabled",
        error: status.error,
        last_event_at: heard === null ? null : new Date(heard).toISOString(),
        last_event_age_s: heard === null ? null : Math.max(0, Math.round((now - heard) / 1000)),
      };
      return [name, row];
    }),
  );
}

function latest(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.max(a, b);
}
