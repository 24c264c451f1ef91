import { describe, expect, it } from 'vitest';
import { RealClock, VirtualClock } from '../../router/clock.js';

describe('VirtualClock', () => {
  it('runs timers in time order, equal times in the order they were set', () => {
    const clock = new VirtualClock(100);
    const ran: string[] = [];
    clock.at(300, () => ran.push('c'));
    clock.at(200, () => ran.push('a'));
    clock.at(200, () => ran.push('b'));
    const cancelled = clock.at(250, () => ran.push('x'));
    cancelled.cancel();
    expect(clock.nextAt()).toBe(200);
    clock.advanceTo(260);
    expect(ran).toEqual(['a', 'b']);
    expect(clock.now()).toBe(260);
    expect(clock.runAll()).toBe(1);
    expect(ran).toEqual(['a', 'b', 'c']);
    expect(clock.now()).toBe(300);
    expect(clock.step()).toBe(false);
  });

  it('runs a timer set in the past at the current time, never moving time backwards', () => {
    const clock = new VirtualClock(50);
    let at = -1;
    clock.at(10, () => (at = clock.now()));
    clock.runAll();
    expect(at).toBe(50);
  });
});

describe('RealClock', () => {
  it('fires a timer at its time', async () => {
    const clock = new RealClock();
    const t0 = clock.now();
    const fired = await new Promise<number>((resolve) => clock.at(t0 + 20, () => resolve(clock.now())));
    expect(fired - t0).toBeGreaterThanOrEqual(19);
  });
});
