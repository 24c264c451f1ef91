import { describe, expect, it, vi } from 'vitest';
import { ReceiveLoop, receiveBackoffMs } from '../../server/kv-events/receive-loop.js';

describe('receive backoff', () => {
  it('waits 10 ms x 2^n after the (n+1)-th error in a row, capped at 5000 ms', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map(receiveBackoffMs)).toEqual([10, 20, 40, 80, 160, 320, 640, 1280, 2560]);
    expect(receiveBackoffMs(10)).toBe(5000);
    expect(receiveBackoffMs(1000)).toBe(5000);
  });
});

describe('ReceiveLoop', () => {
  it('keeps receiving after errors, backing off, and resets the backoff after a good message', async () => {
    const script: (string | Error)[] = [new Error('a'), new Error('b'), new Error('c'), 'm1', new Error('d'), 'm2'];
    const delays: number[] = [];
    const handled: string[] = [];
    const loop: ReceiveLoop<string> = new ReceiveLoop(
      async () => {
        const next = script.shift();
        if (next === undefined) {
          loop.stop();
          throw new Error('closed');
        }
        if (next instanceof Error) throw next;
        return next;
      },
      (message) => handled.push(message),
      (_error, delayMs) => delays.push(delayMs),
    );
    await loop.run();
    expect(handled).toEqual(['m1', 'm2']);
    expect(delays).toEqual([10, 20, 40, 10]);
  });

  it('stop() ends a capped 5 s backoff wait at once', async () => {
    vi.useFakeTimers();
    try {
      const delays: number[] = [];
      const loop = new ReceiveLoop<string>(
        async () => {
          throw new Error('down');
        },
        () => undefined,
        (_error, delayMs) => delays.push(delayMs),
      );
      const running = loop.run();
      // Nine waits (10 ms .. 2560 ms) take 5110 ms; the tenth is the 5 s cap.
      await vi.advanceTimersByTimeAsync(5110);
      expect(delays.at(-1)).toBe(5000);
      let done = false;
      void running.then(() => (done = true));
      loop.stop();
      await vi.advanceTimersByTimeAsync(0);
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a receive rejected because the loop was stopped is not reported as an error', async () => {
    let reject: (error: Error) => void = () => undefined;
    const errors: unknown[] = [];
    const loop = new ReceiveLoop<string>(
      () => new Promise<string>((_, r) => (reject = r)),
      () => undefined,
      (error) => errors.push(error),
    );
    const running = loop.run();
    loop.stop();
    reject(new Error('socket closed'));
    await running;
    expect(errors).toEqual([]);
  });
});
