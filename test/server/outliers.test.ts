// The outlier detector on a virtual clock: which failures eject a worker,
// how long it stays out (doubling when ejected again soon after it came back,
// starting over after a healthy period), how the probe readmits it, and the
// cap that never ejects a model's last workers.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { ConfigError } from '../../server/config/fields.js';
import { DEFAULTS, validateConfig, type OutlierEjectionConfig } from '../../server/config/schema.js';
import { OutlierDetector } from '../../server/workers/outliers.js';

const CONFIG: OutlierEjectionConfig = {
  ...DEFAULTS.outlierEjection,
  consecutiveConnectFailures: 3,
  consecutive5xx: 5,
  baseEjectionMs: 1000,
  maxEjectionMs: 5000,
  backoffResetMs: 60_000,
  probeIntervalMs: 100,
  maxEjectionPercent: 50,
};

/** Lets the probe's promise settle (no time passes on the virtual clock). */
const settle = () => new Promise((resolve) => setImmediate(resolve));

function setup(config: Partial<OutlierEjectionConfig> = {}, workers = ['a', 'b', 'c', 'd']) {
  const clock = new VirtualClock(0);
  const ejected = new Set<string>();
  const draining = new Set<string>();
  const healthy = new Map<string, boolean>();
  const probes: { id: string; at: number }[] = [];
  const detector = new OutlierDetector({ ...CONFIG, ...config }, clock, {
    setEjected: (id, out) => void (out ? ejected.add(id) : ejected.delete(id)),
    draining: (id) => draining.has(id),
    probe: async (id) => {
      probes.push({ id, at: clock.now() });
      return healthy.get(id) ?? false;
    },
    log: () => {},
  });
  for (const id of workers) detector.add(id, 'm');
  const fail = (id: string, times: number, kind: 'connect_failure' | 'timeout' | '5xx' = 'connect_failure') => {
    for (let i = 0; i < times; i++) detector.record(id, kind);
  };
  /** Makes the worker healthy and runs the clock until the probe readmits it. */
  const recover = async (id: string) => {
    healthy.set(id, true);
    clock.advanceTo(clock.now() + detector.view(id)!.ejection!.probingInMs);
    await settle();
    expect(ejected.has(id)).toBe(false);
    healthy.set(id, false);
  };
  return { clock, detector, ejected, draining, healthy, probes, fail, recover };
}

describe('O: outlier ejection', () => {
  it('O1: consecutive connection failures or timeouts eject at their threshold; a success or an answer breaks the streak', () => {
    const { detector, ejected, fail } = setup();
    fail('a', 2);
    detector.record('a', 'success');
    fail('a', 2);
    // A 5xx is an answer: the worker is reachable.
    detector.record('a', '5xx');
    fail('a', 2);
    expect(ejected.has('a')).toBe(false);
    fail('a', 1, 'timeout');
    expect(ejected.has('a')).toBe(true);
    expect(detector.view('a')!.ejection).toMatchObject({ reason: 'timeout', failures: 3, streak: 1, backoffMs: 1000 });
    expect(detector.view('a')!.ejections).toEqual({ connect_failure: 0, timeout: 1, '5xx': 0, stall: 0 });
  });

  it('O2: consecutive 5xx answers eject at their threshold; connection failures do not reset them, a success does', () => {
    const { detector, ejected, fail } = setup();
    fail('a', 4, '5xx');
    detector.record('a', 'success');
    fail('a', 4, '5xx');
    fail('a', 1);
    expect(ejected.has('a')).toBe(false);
    fail('a', 1, '5xx');
    expect(detector.view('a')!.ejection).toMatchObject({ reason: '5xx', failures: 5 });
  });

  it('O3: a threshold of 0 turns that trigger off', () => {
    const { ejected, fail } = setup({ consecutiveConnectFailures: 0 });
    fail('a', 100);
    expect(ejected.has('a')).toBe(false);
    fail('a', 5, '5xx');
    expect(ejected.has('a')).toBe(true);
  });

  it('O4: no probe before the backoff ends; unhealthy probes repeat every interval; the first healthy one readmits with clean streaks', async () => {
    const { clock, detector, ejected, healthy, probes, fail } = setup();
    fail('a', 3);
    clock.advanceTo(999);
    await settle();
    expect(probes).toEqual([]);
    clock.advanceTo(1000);
    await settle();
    clock.advanceTo(1100);
    await settle();
    expect(probes).toEqual([
      { id: 'a', at: 1000 },
      { id: 'a', at: 1100 },
    ]);
    expect(ejected.has('a')).toBe(true);
    healthy.set('a', true);
    clock.advanceTo(1200);
    await settle();
    expect(ejected.has('a')).toBe(false);
    expect(detector.view('a')).toMatchObject({ ejection: null, consecutiveConnectFailures: 0, consecutive5xx: 0, probes: { healthy: 1, unhealthy: 2 } });
    clock.advanceTo(5000);
    await settle();
    expect(probes).toHaveLength(3);
  });

  it('O5: ejected again soon after coming back, a worker stays out twice as long, up to the maximum; after a healthy period it starts over', async () => {
    const { clock, detector, fail, recover } = setup();
    const backoffs: number[] = [];
    for (let i = 0; i < 5; i++) {
      fail('a', 3);
      backoffs.push(detector.view('a')!.ejection!.backoffMs);
      await recover('a');
    }
    expect(backoffs).toEqual([1000, 2000, 4000, 5000, 5000]);
    clock.advanceTo(clock.now() + 60_000);
    fail('a', 3);
    expect(detector.view('a')!.ejection).toMatchObject({ backoffMs: 1000, streak: 1 });
  });

  it('O6: outcomes of requests still in flight while a worker is out change nothing; only the probe readmits it', () => {
    const { detector, ejected, fail } = setup();
    fail('a', 3);
    detector.record('a', 'success');
    fail('a', 10);
    expect(ejected.has('a')).toBe(true);
    expect(detector.view('a')!.ejection).toMatchObject({ failures: 3 });
    expect(detector.view('a')!.ejections.connect_failure).toBe(1);
  });

  it('O7: at most max_ejection_percent of a model is out (at least one), never its last worker in rotation, and draining workers are not counted', async () => {
    const { detector, ejected, fail, recover } = setup({ maxEjectionPercent: 50 });
    fail('a', 3);
    fail('b', 3);
    fail('c', 3);
    expect([...ejected].sort()).toEqual(['a', 'b']);
    expect(detector.view('c')!.held.connect_failure).toBe(1);
    // Once one is back, the next failure of the held worker ejects it.
    await recover('a');
    fail('c', 1);
    expect(ejected.has('c')).toBe(true);

    // Two workers left in the pool (two draining): one may go, never both.
    const two = setup({ maxEjectionPercent: 10 });
    two.draining.add('c');
    two.draining.add('d');
    two.fail('a', 3);
    two.fail('b', 3);
    expect([...two.ejected]).toEqual(['a']);
    expect(two.detector.view('b')!.held.connect_failure).toBe(1);
  });

  it('O8: the only worker of a model is never ejected, but a draining worker may be', () => {
    const { detector, ejected, draining, fail } = setup({ maxEjectionPercent: 100 }, ['solo']);
    fail('solo', 10);
    expect(ejected.has('solo')).toBe(false);
    expect(detector.view('solo')!.held.connect_failure).toBe(8);
    draining.add('solo');
    fail('solo', 1);
    expect(ejected.has('solo')).toBe(true);
  });

  it("O9: workers of other models do not count toward a model's cap", () => {
    const { detector, ejected, fail } = setup({}, ['a']);
    detector.add('x', 'other');
    detector.add('y', 'other');
    fail('a', 3);
    fail('x', 3);
    expect([...ejected]).toEqual(['x']);
  });

  it('O10: a probe that answers after its worker was removed, or after close, readmits nothing', async () => {
    const { clock, detector, ejected, healthy, probes, fail } = setup();
    fail('a', 3);
    fail('b', 3);
    healthy.set('a', true);
    healthy.set('b', true);
    detector.remove('a');
    clock.advanceTo(1000);
    expect(probes.map((p) => p.id)).toEqual(['b']);
    detector.close();
    await settle();
    expect(ejected.has('b')).toBe(true);
  });
});

describe('outlier_ejection config', () => {
  const workers = [{ id: 'w0', url: 'http://10.0.0.5:8000', model: 'llama' }];
  const read = (section: unknown) => validateConfig({ outlier_ejection: section, workers }).outlierEjection;

  it('has the documented defaults, and a max backoff that follows a larger base', () => {
    expect(validateConfig({ workers }).outlierEjection).toEqual({
      consecutiveConnectFailures: 3,
      consecutive5xx: 5,
      baseEjectionMs: 1000,
      maxEjectionMs: 30_000,
      backoffResetMs: 60_000,
      probeIntervalMs: 250,
      probeTimeoutMs: 1000,
      probePath: '/health',
      maxEjectionPercent: 50,
      stallMs: 10_000,
      stallProbeTimeoutMs: 3000,
    });
    expect(read({ base_ejection_ms: 45_000 })).toMatchObject({ baseEjectionMs: 45_000, maxEjectionMs: 45_000 });
    expect(read({ consecutive_5xx: 0, probe_path: '/v1/health' })).toMatchObject({ consecutive5xx: 0, probePath: '/v1/health' });
  });

  it.each([
    [/^outlier_ejection\.max_ejection_ms: must be at least base_ejection_ms \(2000\), got 1000/, { base_ejection_ms: 2000, max_ejection_ms: 1000 }],
    [/^outlier_ejection\.probe_path: must be a path starting with "\/"/, { probe_path: 'health' }],
    [/^outlier_ejection\.max_ejection_percent: must be >= 1/, { max_ejection_percent: 0 }],
    [/^outlier_ejection\.probe_interval_ms: must be >= 10/, { probe_interval_ms: 1 }],
    [/^outlier_ejection\.consecutive_5xx: must be an integer/, { consecutive_5xx: 1.5 }],
    [/^outlier_ejection\.probe_intervall_ms: unknown field/, { probe_intervall_ms: 100 }],
    [/^outlier_ejection\.stall_ms: must be an integer/, { stall_ms: 0.5 }],
    [/^outlier_ejection\.stall_probe_timeout_ms: must be >= 1/, { stall_probe_timeout_ms: 0 }],
  ] as const)('%s', (message, section) => {
    expect(() => read(section)).toThrow(ConfigError);
    expect(() => read(section)).toThrow(message);
  });
});
