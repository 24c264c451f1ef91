import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import type { QueuedHead, RequestClassifier } from '../../router/scheduler/contracts.js';
import { Scheduler } from '../../router/scheduler/scheduler.js';
import { WorkerInputs, type WorkerRows } from '../../router/worker-inputs.js';
import { ScriptedClassifier } from './helpers/scripted-gate.js';
import { TablePlacement } from './helpers/table-placement.js';
import { Outcomes, policy, req } from './helpers/requests.js';

const w = (id: string) => ({ id, rank: 0 });

function setup(classifier: RequestClassifier, workers = 3) {
  const clock = new VirtualClock(0);
  const placement = new TablePlacement(workers);
  const scheduler = new Scheduler({
    clock,
    placement,
    classes: [policy({ busy: { prefillTokens: 150 } }), policy({ name: 'bulk', quantum: 10, sloMs: 100 })],
    classifier,
  });
  const out = new Outcomes();
  const submit = (over: Parameters<typeof req>[0] = {}) => {
    const r = req(over);
    scheduler.submit(r, out.handlers(r.id));
    return r;
  };
  return { clock, placement, scheduler, out, submit };
}

describe('C: classification', () => {
  it('C1: classify answers at once; a rejection ends the request with the classifier named', () => {
    const { submit, out } = setup({ name: 'deny', classify: () => ({ reject: { message: 'no agents today', status: 403 } }) });
    const r = submit();
    const err = out.rejected.get(r.id)!;
    expect(err.status).toBe(403);
    expect(err.message).toBe('no agents today');
    expect(err.details).toMatchObject({ classifier: 'deny' });
  });

  it('C2: overrides set the policy class, lane, cost and deadline the queue works with', () => {
    const classifier = new ScriptedClassifier();
    const heads: QueuedHead[] = [];
    classifier.gate!.decide = (head) => (heads.push(head), { go: true });
    classifier.overrides = () => ({ policyClass: 'bulk', lane: 'cold', cost: 7, deadline: 50 });
    const { submit } = setup(classifier);
    submit({ promptTokens: 300 });
    expect(heads[0]).toMatchObject({ policyClass: 'bulk', lane: 'named:cold', cost: 7, deadline: 50, cachedTokens: 0 });
    const late = setup({ name: 'late', classify: () => ({ deadline: -1 }) });
    const lr = late.submit();
    expect(late.out.rejected.get(lr.id)?.details).toMatchObject({ stage: 'admission' });
  });

  it('C3: allowed workers are intersected with the caller set; an empty intersection keeps the caller set', () => {
    const { submit, out } = setup({ name: 'narrow', classify: () => ({ allowedWorkers: [w('w2')] }) });
    expect(out.dispatched.get(submit().id)?.id).toBe('w2');
    expect(out.dispatched.get(submit({ allowedWorkers: [w('w1'), w('w2')] }).id)?.id).toBe('w2');
    // Disjoint: the caller's set stands.
    expect(out.dispatched.get(submit({ allowedWorkers: [w('w0')] }).id)?.id).toBe('w0');
  });

  it('C3: the capacity check honours the narrowed set', () => {
    const { submit, out, placement } = setup({ name: 'narrow', classify: () => ({ allowedWorkers: [w('w2')] }) });
    placement.worker('w2').prefillTokens = 1000;
    const r = submit({ sessionId: 's' });
    expect(out.dispatched.has(r.id)).toBe(false); // w0 and w1 are free but not allowed
  });

  it('C4: cachedTokens is the best cached prefix over the eligible workers', () => {
    const seen: number[] = [];
    const { submit, placement } = setup({
      name: 'c',
      classify: (r) => {
        seen.push(r.cachedTokens);
        return {};
      },
    });
    placement.worker('w1').cachedTokens = 64;
    placement.worker('w2').cachedTokens = 32;
    submit();
    submit({ allowedWorkers: [w('w2')] });
    expect(seen).toEqual([64, 32]);
  });
});

describe('W: worker inputs for classifiers', () => {
  it('W1: a classifier that declares no inputs costs nothing: no rows are built', () => {
    let rows: WorkerRows | undefined;
    const { submit, placement } = setup({ name: 'none', classify: (_r, ws) => ((rows = ws), {}) });
    submit();
    expect(placement.rowsBuilt).toBe(0);
    expect(rows!.count).toBe(0);
  });

  it('W2: a classifier gets rows for the groups it declared, for every eligible worker including overloaded ones', () => {
    let rows: WorkerRows | undefined;
    const { submit, placement } = setup({ name: 'load', inputs: WorkerInputs.LOAD, classify: (_r, ws) => ((rows = ws), {}) });
    placement.worker('w0').prefillTokens = 5000;
    submit();
    expect(rows!.count).toBe(3);
    expect(rows!.prefillTokens).toBeDefined();
    expect(rows!.cachedTokens).toBeUndefined();
    expect([...rows!.prefillTokens!]).toContain(5000);
  });

  it('W4: a retry reuses the earlier classification and builds no rows', () => {
    let classified = 0;
    const { submit, scheduler, placement, out } = setup({
      name: 'narrow',
      inputs: WorkerInputs.LOAD,
      classify: () => {
        classified++;
        return { allowedWorkers: [w('w1'), w('w2')] };
      },
    });
    const r = submit();
    const first = out.dispatched.get(r.id)!;
    const built = placement.rowsBuilt;
    const again = scheduler.retry(r.id, first);
    expect(classified).toBe(1);
    expect(placement.rowsBuilt).toBe(built);
    expect(again).toMatchObject({ worker: { id: first.id === 'w1' ? 'w2' : 'w1' } });
  });
});
