// The stall watch on a virtual clock, with dispatch controllers that behave
// as undici's do (an abort reaches the handler as onResponseError): when a
// quiet worker is probed, what a healthy or a failed probe does to it and to
// the attempts waiting on it, and what does not count as a stall (signs of
// life, attempts paused by a slow client, an ejection the cap holds). With
// the outlier detector: a stall ejection has its own reason, obeys the cap,
// and the detector's probe readmits the worker.
import type { Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { DEFAULTS } from '../../server/config/schema.js';
import { OutlierDetector } from '../../server/workers/outliers.js';
import { StallWatch, StalledWorkerError } from '../../server/workers/stall-watch.js';

const STALL_MS = 1000;

/** Lets the probe's promise settle (no time passes on the virtual clock). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

class Controller implements Dispatcher.DispatchController {
  aborted = false;
  paused = false;
  reason: Error | null = null;
  constructor(private readonly handler: Dispatcher.DispatchHandler) {}
  abort(reason: Error): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.handler.onResponseError?.(this, reason);
  }
  pause(): void {
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
  }
}

/** An exchange's side of one attempt: what reached it. */
class Inner implements Dispatcher.DispatchHandler {
  readonly events: string[] = [];
  error: Error | null = null;
  onResponseStart(): void {
    this.events.push('start');
  }
  onResponseData(): void {
    this.events.push('data');
  }
  onResponseEnd(): void {
    this.events.push('end');
  }
  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    this.error = error;
  }
}

function setup(options: { healthy?: boolean; cap?: boolean; probe?: () => Promise<boolean> } = {}) {
  const clock = new VirtualClock(0);
  const probes: { id: string; at: number }[] = [];
  const ejections: { id: string; quietMs: number; waiting: number }[] = [];
  let healthy = options.healthy ?? false;
  const watch = new StallWatch(STALL_MS, clock, {
    probe: async (id) => {
      probes.push({ id, at: clock.now() });
      return options.probe ? options.probe() : healthy;
    },
    ejected: (id) => ejections.some((e) => e.id === id) && options.cap !== true,
    eject: (id, quietMs, waiting) => {
      ejections.push({ id, quietMs, waiting });
      return options.cap !== true;
    },
    log: () => {},
  });
  watch.add('a');
  watch.add('b');
  /** Dispatches one attempt on `id`, started on a socket. */
  const start = (id: string) => {
    const inner = new Inner();
    const handler = watch.watch(id, inner);
    const controller = new Controller(handler);
    handler.onRequestStart?.(controller, {});
    return { inner, handler, controller };
  };
  /** Advances the clock in sweep-sized steps, letting probes settle between them. */
  const run = async (ms: number) => {
    const until = clock.now() + ms;
    while (clock.now() < until) {
      clock.advanceTo(Math.min(until, clock.now() + STALL_MS / 8));
      await settle();
    }
  };
  return { clock, watch, probes, ejections, start, run, setHealthy: (h: boolean) => void (healthy = h) };
}

describe('S: stall watch', () => {
  it('S1: a worker quiet for stall_ms with an attempt waiting is probed, not before; a failed probe ejects it and aborts what waits on it', async () => {
    const { watch, probes, ejections, start, run, clock } = setup();
    const first = start('a');
    const second = start('a');
    // b answers and ends: nothing waits on it.
    const other = start('b');
    other.handler.onResponseStart?.(other.controller, 200, {});
    other.handler.onResponseEnd?.(other.controller, {});
    await run(STALL_MS * 0.9);
    expect(probes).toEqual([]);
    await run(STALL_MS * 0.5);
    expect(probes.map((p) => p.id)).toEqual(['a']);
    expect(probes[0]!.at).toBeGreaterThanOrEqual(STALL_MS);
    expect(ejections).toHaveLength(1);
    expect(ejections[0]).toMatchObject({ id: 'a', waiting: 2 });
    expect(ejections[0]!.quietMs).toBeGreaterThanOrEqual(STALL_MS);
    for (const attempt of [first, second]) {
      expect(attempt.inner.error).toBeInstanceOf(StalledWorkerError);
      expect(attempt.inner.error!.message).toMatch(/^stalled: no response progress for \d+ ms and no answer to its health probe$/);
    }
    expect(watch.view('a')).toMatchObject({ inFlight: 0, probes: { healthy: 0, unhealthy: 1 }, aborted: 2 });
    expect(clock.now()).toBeLessThan(STALL_MS * 1.5);
  });

  it('S2: signs of life more often than stall_ms keep a worker unprobed; the attempt is relayed untouched', async () => {
    const { probes, start, run, watch } = setup();
    const a = start('a');
    a.handler.onResponseStart?.(a.controller, 200, {});
    for (let i = 0; i < 10; i++) {
      await run(STALL_MS * 0.6);
      a.handler.onResponseData?.(a.controller, Buffer.from('x'));
    }
    a.handler.onResponseEnd?.(a.controller, {});
    expect(probes).toEqual([]);
    expect(a.inner.events).toEqual(['start', ...Array(10).fill('data'), 'end']);
    expect(a.inner.error).toBeNull();
    expect(watch.view('a').inFlight).toBe(0);
  });

  it('S3: a healthy probe keeps the worker and its attempts; the next probe waits for another quiet stall_ms', async () => {
    const { probes, ejections, start, run, watch } = setup({ healthy: true });
    const a = start('a');
    await run(STALL_MS * 1.3);
    expect(probes).toHaveLength(1);
    await run(STALL_MS * 0.9);
    expect(probes).toHaveLength(1);
    await run(STALL_MS * 0.5);
    expect(probes).toHaveLength(2);
    expect(probes[1]!.at - probes[0]!.at).toBeGreaterThanOrEqual(STALL_MS);
    expect(ejections).toEqual([]);
    expect(a.controller.aborted).toBe(false);
    expect(watch.view('a')).toMatchObject({ inFlight: 1, probes: { healthy: 2, unhealthy: 0 }, aborted: 0 });
  });

  it('S4: attempts paused by a slow client, and a worker with nothing in flight, are not waiting on it', async () => {
    const { probes, start, run } = setup();
    const a = start('a');
    a.controller.pause();
    await run(STALL_MS * 3);
    expect(probes).toEqual([]);
    a.controller.resume();
    await run(STALL_MS * 1.3);
    expect(probes.map((p) => p.id)).toEqual(['a']);
  });

  it('S5: an ejection the cap holds aborts nothing, and the worker is asked again after another stall_ms', async () => {
    const { probes, ejections, start, run } = setup({ cap: true });
    const a = start('a');
    await run(STALL_MS * 1.3);
    expect(ejections).toHaveLength(1);
    expect(a.controller.aborted).toBe(false);
    await run(STALL_MS * 1.3);
    expect(probes).toHaveLength(2);
  });

  it('S6: the quiet time counts from the last sign of life, and an attempt that ends leaves the worker unsuspected', async () => {
    const { probes, start, run, watch } = setup();
    const a = start('a');
    await run(STALL_MS * 0.75);
    a.handler.onResponseStart?.(a.controller, 200, {});
    await run(STALL_MS * 0.75);
    expect(probes).toEqual([]);
    expect(watch.view('a').quietMs).toBeLessThan(STALL_MS);
    a.handler.onResponseEnd?.(a.controller, {});
    await run(STALL_MS * 3);
    expect(probes).toEqual([]);
    expect(watch.view('a')).toMatchObject({ inFlight: 0, quietMs: 0 });
  });

  it('S10: a sign of life while the probe waits for its answer keeps the worker, even when the probe then fails', async () => {
    let answer!: (healthy: boolean) => void;
    const { probes, ejections, start, run } = setup({ probe: () => new Promise<boolean>((resolve) => (answer = resolve)) });
    const a = start('a');
    await run(STALL_MS * 1.3);
    expect(probes).toHaveLength(1);
    // The probe is slow to fail; meanwhile sweeps go on and the worker sends its headers.
    await run(STALL_MS * 0.5);
    a.handler.onResponseStart?.(a.controller, 200, {});
    await run(STALL_MS * 0.5);
    answer(false);
    await run(STALL_MS * 0.1);
    expect(ejections).toEqual([]);
    expect(a.controller.aborted).toBe(false);
  });

  it('S7: stall_ms 0 turns the watch off: the handler is dispatched as it is', () => {
    const watch = new StallWatch(0, new VirtualClock(0), { probe: async () => false, ejected: () => false, eject: () => true, log: () => {} });
    watch.add('a');
    const inner = new Inner();
    expect(watch.watch('a', inner)).toBe(inner);
    expect(watch.view('a').inFlight).toBe(0);
  });
});

describe('S: stall ejection in the outlier detector', () => {
  function detector(workers: string[]) {
    const clock = new VirtualClock(0);
    const out = new Set<string>();
    let healthy = false;
    const d = new OutlierDetector({ ...DEFAULTS.outlierEjection, baseEjectionMs: 500, probeIntervalMs: 100, maxEjectionPercent: 50 }, clock, {
      setEjected: (id, ejected) => void (ejected ? out.add(id) : out.delete(id)),
      draining: () => false,
      probe: async () => healthy,
      log: () => {},
    });
    for (const id of workers) d.add(id, 'm');
    return { clock, d, out, setHealthy: (h: boolean) => void (healthy = h) };
  }

  it('S8: ejects with reason stall and what tripped it; the detector probe readmits the worker once healthy', async () => {
    const { clock, d, out, setHealthy } = detector(['a', 'b', 'c']);
    expect(d.stalled('a', { quietMs: 1234, waiting: 3 })).toBe(true);
    expect(out.has('a')).toBe(true);
    expect(d.view('a')!.ejection).toMatchObject({ reason: 'stall', failures: 1, stall: { quietMs: 1234, waiting: 3 }, backoffMs: 500 });
    expect(d.view('a')!.ejections).toEqual({ connect_failure: 0, timeout: 0, '5xx': 0, stall: 1 });
    // Out already: a second stall report changes nothing.
    expect(d.stalled('a', { quietMs: 1, waiting: 1 })).toBe(false);
    clock.advanceTo(600);
    await settle();
    expect(out.has('a')).toBe(true);
    setHealthy(true);
    clock.advanceTo(700);
    await settle();
    expect(out.has('a')).toBe(false);
    expect(d.view('a')!.ejection).toBeNull();
  });

  it('S9: the cap holds a stall ejection like any other: never the last worker in rotation', () => {
    const { d, out } = detector(['a', 'b']);
    expect(d.stalled('a', { quietMs: 1000, waiting: 1 })).toBe(true);
    expect(d.stalled('b', { quietMs: 1000, waiting: 1 })).toBe(false);
    expect([...out]).toEqual(['a']);
    expect(d.view('b')!.held.stall).toBe(1);
  });
});
