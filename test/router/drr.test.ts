import { describe, expect, it } from 'vitest';
import { DeficitRoundRobin, type DrrClass, type DrrOffer } from '../../router/scheduler/drr.js';

interface C extends DrrClass {
  name: string;
  heads: number[];
  blocked?: boolean;
}
const cls = (name: string, quantum: number, heads: number[], blocked = false): C => ({ name, quantum, deficit: 0, heads, blocked });
const offer = (c: C): DrrOffer => (c.heads.length === 0 ? 'empty' : c.blocked ? 'blocked' : { cost: c.heads[0]! });

function serve(drr: DeficitRoundRobin<C>, count: number): string[] {
  const served: string[] = [];
  for (let i = 0; i < count; i++) {
    const c = drr.pick(offer);
    if (!c) break;
    const cost = c.heads.shift()!;
    drr.served(c, cost, offer(c));
    served.push(c.name);
  }
  return served;
}

describe('Q2: deficit round robin across classes', () => {
  it('Q2: shares service in proportion to quanta (512:128 serves about four premium per regular)', () => {
    const premium = cls('p', 512, Array(400).fill(100));
    const regular = cls('r', 128, Array(400).fill(100));
    const served = serve(new DeficitRoundRobin([premium, regular]), 320);
    const p = served.filter((s) => s === 'p').length;
    expect(p).toBeGreaterThanOrEqual(250);
    expect(p).toBeLessThanOrEqual(262);
    const equal = serve(new DeficitRoundRobin([cls('a', 256, Array(400).fill(100)), cls('b', 256, Array(400).fill(100))]), 320);
    expect(Math.abs(equal.filter((s) => s === 'a').length - 160)).toBeLessThanOrEqual(2);
  });

  it('Q2: a quantum is added only when the head is not yet affordable', () => {
    const a = cls('a', 10, [3, 3, 3, 3]);
    const drr = new DeficitRoundRobin([a, cls('b', 10, [100])]);
    expect(drr.pick(offer)).toBe(a);
    expect(a.deficit).toBe(10);
    a.heads.shift();
    drr.served(a, 3, offer(a));
    // Still affordable: no quantum is added on the next pick.
    expect(drr.pick(offer)).toBe(a);
    expect(a.deficit).toBe(7);
  });

  it('Q2: a class stays on while its next head is affordable (quantum 10, heads 3,3,3,3: three go, leftover 1)', () => {
    const a = cls('a', 10, [3, 3, 3, 3]);
    const b = cls('b', 10, [5]);
    const served = serve(new DeficitRoundRobin([a, b]), 4);
    expect(served).toEqual(['a', 'a', 'a', 'b']);
    expect(a.deficit).toBe(1);
  });

  it('Q2: a full ring without progress grants the minimum whole rounds to every dispatchable class at once', () => {
    const a = cls('a', 10, [1000]);
    const b = cls('b', 20, [1000]);
    const c = cls('c', 100, [5], true);
    const drr = new DeficitRoundRobin([a, b, c]);
    let offers = 0;
    const picked = drr.pick((x) => {
      offers++;
      return offer(x);
    });
    // b needs ceil((1000-20)/20) = 49 more rounds after its first quantum, a needs 99: b wins after 49 bulk rounds.
    expect(picked).toBe(b);
    expect(offers).toBe(3);
    expect(b.deficit).toBe(20 + 49 * 20);
    expect(a.deficit).toBe(10 + 49 * 10);
    // Blocked classes keep credit and earn none.
    expect(c.deficit).toBe(0);
  });

  it('Q2: a blocked class keeps the credit it earned', () => {
    const a = cls('a', 10, [25]);
    const b = cls('b', 10, [5]);
    const drr = new DeficitRoundRobin([a, b]);
    expect(drr.pick(offer)).toBe(b);
    expect(a.deficit).toBe(10);
    a.blocked = true;
    b.heads.shift();
    drr.served(b, 5, offer(b));
    expect(drr.pick(offer)).toBeUndefined();
    expect(a.deficit).toBe(10);
  });

  it('Q2: a class that empties resets its deficit', () => {
    const a = cls('a', 100, [10]);
    const drr = new DeficitRoundRobin([a, cls('b', 10, [50])]);
    drr.pick(offer);
    a.heads.shift();
    drr.served(a, 10, offer(a));
    expect(a.deficit).toBe(0);
  });

  it('Q2: rejecting an expired head spends no deficit and does not move the cursor', () => {
    const a = cls('a', 10, [5, 5]);
    const b = cls('b', 10, [5]);
    const drr = new DeficitRoundRobin([a, b]);
    a.deficit = 3;
    const picked = drr.pick((x) => {
      if (x === a && a.heads.length === 2) a.heads.shift(); // the expired head is dropped inside offer
      return offer(x);
    });
    expect(picked).toBe(a);
    expect(drr.position).toBe(0);
    expect(a.deficit).toBe(13);
  });
});
