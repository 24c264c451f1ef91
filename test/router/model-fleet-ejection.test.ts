// Ejection takes a worker out of selection through the ledger's availability,
// like draining, but the two are separate switches: ending one leaves the
// other in force, and a worker is back only when neither holds. An ejected
// worker takes no part in the live count or the capacities gates budget.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import { plainFields } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';

const prompt = Array.from({ length: 32 }, (_, i) => i + 1);
let n = 0;

function setup() {
  const route = new ModelRouter({ model: 'm', blockSize: 4, clock: new VirtualClock(0), seed: 3 });
  for (const id of ['a', 'b']) route.addWorker({ id, totalBlocks: 100, maxBatchedTokens: 512 });
  const placed = (over = {}) => {
    const out: (Admission | RouterError)[] = [];
    route.submit(plainFields(`r${n++}`, over), prompt, { dispatch: (a) => out.push(a), reject: (e) => out.push(e) });
    return out[0]!;
  };
  return { route, p: route.fleet, placed };
}

describe('E: ejection in the model fleet', () => {
  it('E1: an ejected worker gets no requests and explain says it is unavailable; readmitted, it gets them again', () => {
    const { route, p, placed } = setup();
    route.setEjected('a', true);
    for (let i = 0; i < 10; i++) expect((placed() as Admission).worker.id).toBe('b');
    const x = route.explain(plainFields('x'), prompt).workers.find((w) => w.worker === 'a')!;
    expect(x).toMatchObject({ eligible: false, filtered: 'unavailable' });
    expect(p.liveWorkers()).toBe(1);
    expect(p.workerCapacities().map((c) => c.worker.id)).toEqual(['b']);
    route.setEjected('a', false);
    expect(p.liveWorkers()).toBe(2);
    expect((placed({ pin: { id: 'a', rank: 0 } }) as Admission).worker.id).toBe('a');
  });

  it('E2: undraining an ejected worker leaves it out, and readmitting a drained one leaves it out', () => {
    const { route, placed } = setup();
    route.setEjected('a', true);
    route.setDraining('a', true);
    route.setDraining('a', false);
    expect(placed({ pin: { id: 'a', rank: 0 } })).toMatchObject({ code: 'KVR_ERR_NO_WORKERS' });
    route.setEjected('a', false);
    route.setDraining('a', true);
    route.setEjected('a', true);
    route.setEjected('a', false);
    expect(placed({ pin: { id: 'a', rank: 0 } })).toMatchObject({ code: 'KVR_ERR_NO_WORKERS' });
    expect(route.explain(plainFields('x'), prompt).workers.find((w) => w.worker === 'a')!.filtered).toBe('draining');
    route.setDraining('a', false);
    expect((placed({ pin: { id: 'a', rank: 0 } }) as Admission).worker.id).toBe('a');
  });

  it('E3: every rank of an ejected data-parallel worker leaves selection', () => {
    const route = new ModelRouter({ model: 'm', blockSize: 4, clock: new VirtualClock(0) });
    route.addWorker({ id: 'dp', dataParallelSize: 2, totalBlocks: 100, maxBatchedTokens: 512 });
    route.addWorker({ id: 'b', totalBlocks: 100, maxBatchedTokens: 512 });
    route.setEjected('dp', true);
    expect(route.fleet.liveWorkers()).toBe(1);
    const x = route.explain(plainFields('x'), prompt);
    expect(x.workers.filter((w) => !w.eligible).map((w) => w.worker)).toEqual(['dp', 'dp#1']);
  });
});
