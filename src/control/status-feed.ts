/**
 * The live status stream's one source: whenever the gateway signals a change, the status is
 * computed once and handed to every connected client. Nothing polls; a dashboard ticks uptime and
 * turn durations itself between changes.
 */
import type { ControlSurface, GatewayStatus } from "./control-surface.js";

export interface StatusFeed {
  /** Calls `push` with the current status now and after every change, until unsubscribed. */
  subscribe(push: (status: GatewayStatus) => void): () => void;
}

export function createStatusFeed(
  surface: Pick<ControlSurface, "status" | "onStatusChange">,
  onError: (err: unknown) => void,
): StatusFeed {
  const clients = new Set<(status: GatewayStatus) => void>();
  let stopListening: (() => void) | null = null;
  let computing = false;
  let changedMeanwhile = false;

  /** One computation at a time; changes during it are folded into one more. */
  const refresh = async (): Promise<void> => {
    if (computing) {
      changedMeanwhile = true;
      return;
    }
    computing = true;
    try {
      do {
        changedMeanwhile = false;
        const status = await surface.status();
        for (const push of clients) push(status);
      } while (changedMeanwhile && clients.size > 0);
    } catch (err) {
      onError(err);
    } finally {
      computing = false;
    }
  };

  return {
    subscribe(push) {
      clients.add(push);
      stopListening ??= surface.onStatusChange(() => void refresh());
      // The newcomer needs a first status; the others get it too (it is the current one).
      void refresh();
      return () => {
        clients.delete(push);
        if (clients.size === 0) {
          stopListening?.();
          stopListening = null;
        }
      };
    },
  };
}
