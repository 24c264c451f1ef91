// Pulls messages from a socket until stopped. A receive error must neither end
// the loop (the worker's index would silently go stale) nor spin it: the loop
// waits 10 ms x 2^n after the n-th error in a row, capped at 5000 ms, and
// resets after a good receive. Unlike Dynamo's listener it never gives up; the
// errors show in the listener's counters instead.

const BASE_MS = 10;
const CAP_MS = 5000;

/** Delay after the n-th consecutive receive error (n >= 1). */
export function receiveBackoffMs(consecutiveErrors: number): number {
  const exponent = Math.min(Math.max(consecutiveErrors - 1, 0), 16);
  return Math.min(BASE_MS * 2 ** exponent, CAP_MS);
}

export class ReceiveLoop<T> {
  private stopped = false;
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly receive: () => Promise<T>,
    private readonly handle: (message: T) => void,
    private readonly onError: (error: unknown, delayMs: number) => void,
  ) {}

  /** Runs until stop(); resolves once the loop has left. */
  async run(): Promise<void> {
    let errors = 0;
    while (!this.stopped) {
      let message: T;
      try {
        message = await this.receive();
      } catch (error) {
        // Closing the socket rejects the pending receive; that is the way out, not an error.
        if (this.stopped) break;
        const delay = receiveBackoffMs(++errors);
        this.onError(error, delay);
        await this.sleep(delay);
        continue;
      }
      errors = 0;
      this.handle(message);
    }
  }

  /** Ends the loop after the current receive (the caller closes the socket to end that). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = () => {
        this.wake = null;
        this.timer = null;
        resolve();
      };
      this.timer = setTimeout(this.wake, ms);
    });
  }
}
