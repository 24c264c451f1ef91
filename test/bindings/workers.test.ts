import { describe, expect, it } from 'vitest';
import { WorkerSlots } from '../../bindings/workers.js';

describe('WorkerSlots', () => {
  it('gives each (id, rank) one dense slot and reuses the lowest freed slot', () => {
    const slots = new WorkerSlots();
    expect(slots.ensure('a')).toBe(0);
    expect(slots.ensure('a', 1)).toBe(1);
    expect(slots.ensure('b')).toBe(2);
    expect(slots.ensure('a', 1)).toBe(1);
    expect(slots.release('a', 0)).toBe(0);
    expect(slots.release('b', 0)).toBe(2);
    expect(slots.ensure('c')).toBe(0);
    expect(slots.capacity).toBe(3);
    expect(slots.size).toBe(2);
    expect(slots.keyOf(1)).toEqual({ id: 'a', rank: 1 });
    expect(slots.slotsOf('a')).toEqual([1]);
  });

  it('rejects empty ids and bad ranks', () => {
    const slots = new WorkerSlots();
    expect(() => slots.ensure('')).toThrow(TypeError);
    expect(() => slots.ensure('w', -1)).toThrow(RangeError);
    expect(() => slots.ensure('w', 1.5)).toThrow(RangeError);
  });
});
