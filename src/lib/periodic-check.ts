/**
 * A check that runs on a timer, never two at a time: a run still going when the next tick comes
 * makes that tick do nothing. A failed run is handed to `onError` and the next tick tries again.
 * The timer does not keep the process alive.
 */
export class PeriodicCheck {
  private timer: NodeJS.Timeout | null = null;
  private running = false;

  constructor(
    private readonly check: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** One run now (skipped while another is under way); never throws. */
  async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      await this.check();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = false;
    }
  }

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.run(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
