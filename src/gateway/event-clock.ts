/**
 * When each platform last handed the gateway something (a message, a catch-up page, a button
 * press): the dashboard shows its age, so a platform that is "connected" but silent shows.
 */
import type { InboundSink } from "../contract/platform.js";

export class PlatformEventClock {
  private readonly last = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  /** `sink` as seen by platform `name`: every call through it counts as an event. */
  sinkFor(name: string, sink: InboundSink): InboundSink {
    const seen = () => this.last.set(name, this.now());
    return {
      receive: (message) => {
        seen();
        return sink.receive(message);
      },
      ...(sink.receiveAll && {
        receiveAll: (messages) => {
          seen();
          return sink.receiveAll!(messages);
        },
      }),
      ...(sink.answerApproval && {
        answerApproval: (press) => {
          seen();
          return sink.answerApproval!(press);
        },
      }),
      ...(sink.refusalFor && { refusalFor: (text) => sink.refusalFor!(text) }),
    };
  }

  /** When `name` last handed over an event (epoch ms), or null since this process started. */
  lastEventAt(name: string): number | null {
    return this.last.get(name) ?? null;
  }
}
