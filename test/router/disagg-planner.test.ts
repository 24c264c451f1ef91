// The disaggregation decider and planner on a real ModelRouter: which requests
// split, where each side goes, what explain says, and that the decode
// bookings settle and the sweep leaves them alone while they are live.
import { describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { decideDisaggregation, type DisaggSettings } from '../../router/disagg/decider.js';
import { decodeIdOf, DisaggPlanner } from '../../router/disagg/planner.js';
import { roleTaints, type WorkerRole } from '../../router/disagg/roles.js';
import { RouterError } from '../../router/errors.js';
import { ModelRouter } from '../../router/model-router.js';
import { plainFields } from '../../router/model-fleet.js';
import type { Admission } from '../../router/scheduler/contracts.js';
import { defaultCostPolicy } from '../../router/selection/policies/default-cost.js';
import { ttftPolicy } from '../../router/selection/policies/ttft.js';
import type { SelectionPolicy } from '../../router/selection/contracts.js';

const BLOCK = 4;
const tokens = (len: number, start = 1) => Array.from({ length: len }, (_, i) => start + i);
let serial = 0;

/** Most tests read the kv cost's terms (decode blocks, overlap); `policy` picks another. */
function fleet(roles: Record<string, WorkerRole>, settings: Partial<DisaggSettings> = {}, policy: SelectionPolicy = defaultCostPolicy()) {
  const clock = new VirtualClock(0);
  const route = new ModelRouter({ model: 'm', blockSize: BLOCK, clock, seed: 3, sweepIntervalMs: 0, policy });
  const s: DisaggSettings = { engine: 'vllm', minRemotePrefillTokens: 32, decodePrefixReuse: true, ...settings };
  for (const [id, role] of Object.entries(roles)) route.addWorker({ id, totalBlocks: 1000, maxBatchedTokens: 256, taints: roleTaints(role, s.engine) });
  const planner = new DisaggPlanner(route, s);
  /** Tells the index that a worker caches this prompt's full blocks. */
  const cache = (id: string, prompt: number[]) => {
    const blocks = Math.floor(prompt.length / BLOCK);
    const hashes = Array.from({ length: blocks }, (_, i) => BigInt(++serial * 1000 + i));
    route.applyEvents({ id, rank: 0 }, {
      ts: 0,
      dpRank: null,
      events: [{ type: 'stored', blockHashes: hashes, parentBlockHash: null, tokenIds: prompt.slice(0, blocks * BLOCK), blockSize: BLOCK, loraName: null, medium: null }],
    });
  };
  const submit = (id: string, prompt: number[]) => {
    let out: Admission | RouterError | undefined;
    const plan = planner.submit(plainFields(id), prompt, { dispatch: (a) => (out = a), reject: (e) => (out = e) });
    return { plan: plan!, admission: out as Admission };
  };
  return { route, planner, cache, submit };
}

describe('decideDisaggregation', () => {
  const s: DisaggSettings = { engine: 'vllm', minRemotePrefillTokens: 100, decodePrefixReuse: true };
  it('short prompts and mostly cached prompts run whole; long uncached ones split', () => {
    expect(decideDisaggregation(99, 0, s)).toMatchObject({ mode: 'aggregated', uncachedTokens: 99 });
    expect(decideDisaggregation(1000, 901, s)).toMatchObject({ mode: 'aggregated', uncachedTokens: 99 });
    expect(decideDisaggregation(1000, 900, s)).toMatchObject({ mode: 'disaggregated', uncachedTokens: 100 });
    expect(decideDisaggregation(100, 0, s).mode).toBe('disaggregated');
    expect(decideDisaggregation(5, null, s)).toMatchObject({ mode: 'disaggregated', reason: 'no live worker runs whole requests' });
    expect(decideDisaggregation(5, 0, { ...s, minRemotePrefillTokens: 0 }).mode).toBe('disaggregated');
  });
});

describe('DisaggPlanner', () => {
  it('a long uncached prompt prefills on a prefill worker and books a decode worker beside it', () => {
    const { planner, route, submit } = fleet({ p0: 'prefill', d0: 'decode' });
    const { plan, admission } = submit('r1', tokens(64));
    expect(plan.decision.mode).toBe('disaggregated');
    expect(admission.worker.id).toBe('p0');
    const decode = planner.bookDecode(plan.request, admission.worker) as Admission;
    expect(decode.worker.id).toBe('d0');
    const load = () => Object.fromEntries(route.fleet.load().map((l) => [l.worker, [l.prefillTokens, l.decodeBlocks, l.activeRequests]]));
    // The prefill side computes the prompt; the decode side holds its blocks and computes none of it.
    expect(load()).toEqual({ p0: [64, 16, 1], d0: [0, 16, 1] });
    route.completed('r1');
    expect(load().p0).toEqual([0, 0, 0]);
    expect(planner.liveDecodes).toBe(1);
    planner.releaseDecode('r1');
    planner.releaseDecode('r1'); // every end may call it
    expect(route.fleet.bookedRequests).toBe(0);
    expect(planner.liveDecodes).toBe(0);
  });

  it('a short prompt runs whole on a decode-capable worker, never on a prefill-only one (vLLM)', () => {
    const { submit } = fleet({ p0: 'prefill', p1: 'prefill', d0: 'decode' });
    for (let i = 0; i < 5; i++) {
      const { plan, admission } = submit(`s${i}`, tokens(16, 100 * i + 1));
      expect(plan.decision.mode).toBe('aggregated');
      expect(admission.worker.id).toBe('d0');
    }
  });

  it('a long prompt cached on a decode-capable worker runs there whole', () => {
    const { submit, cache } = fleet({ p0: 'prefill', d0: 'decode', d1: 'decode' });
    const prompt = tokens(64, 500);
    cache('d1', prompt);
    const { plan, admission } = submit('c1', prompt);
    expect(plan.decision).toMatchObject({ mode: 'aggregated', aggregateCachedTokens: 64, uncachedTokens: 0 });
    expect(admission.worker.id).toBe('d1');
  });

  it('the prefill pick follows the prefix: the prefill worker that caches it wins', () => {
    const { submit, cache } = fleet({ p0: 'prefill', p1: 'prefill', d0: 'decode' });
    const prompt = tokens(80, 900);
    cache('p1', prompt.slice(0, 40));
    const { plan, admission } = submit('x1', prompt);
    expect(plan.decision.mode).toBe('disaggregated');
    expect(admission).toMatchObject({ worker: { id: 'p1' }, cachedTokens: 40 });
  });

  it('the decode pick weighs decode load, and (vLLM) its own cached prefix', () => {
    const { planner, submit, cache } = fleet({ p0: 'prefill', d0: 'decode', d1: 'decode' });
    // One of them carries a long decode; the next goes to the other.
    const first = submit('load', tokens(200, 5000));
    const loaded = (planner.bookDecode(first.plan.request, first.admission.worker) as Admission).worker.id;
    const other = loaded === 'd0' ? 'd1' : 'd0';
    const second = submit('next', tokens(64, 7000));
    expect((planner.bookDecode(second.plan.request, second.admission.worker) as Admission).worker.id).toBe(other);
    planner.releaseDecode('next');
    // A prompt the loaded one caches: pulling less KV outweighs its load.
    const prompt = tokens(400, 20_000);
    cache(loaded, prompt.slice(0, 360));
    const third = submit('cached', prompt);
    expect(third.plan.decision.mode).toBe('disaggregated');
    expect((planner.bookDecode(third.plan.request, third.admission.worker) as Admission).worker.id).toBe(loaded);
  });

  it('with the ttft policy the decode pick weighs the requests decoding on each worker', () => {
    const { planner, submit } = fleet({ p0: 'prefill', d0: 'decode', d1: 'decode' }, {}, ttftPolicy());
    const first = submit('load', tokens(200, 5000));
    const loaded = (planner.bookDecode(first.plan.request, first.admission.worker) as Admission).worker.id;
    for (let i = 0; i < 3; i++) {
      const next = submit(`n${i}`, tokens(64, 7000 + 100 * i));
      expect((planner.bookDecode(next.plan.request, next.admission.worker) as Admission).worker.id).not.toBe(loaded);
      planner.releaseDecode(`n${i}`);
    }
  });

  it('SGLang: the decode pick ignores the decode worker cache, and only role both runs whole', () => {
    const { planner, submit, cache } = fleet({ p0: 'prefill', d0: 'decode', d1: 'decode' }, { engine: 'sglang', decodePrefixReuse: false });
    const first = submit('load', tokens(200, 5000));
    const loaded = (planner.bookDecode(first.plan.request, first.admission.worker) as Admission).worker.id;
    const prompt = tokens(400, 20_000);
    cache(loaded, prompt.slice(0, 360));
    const { plan, admission } = submit('cached', prompt);
    // No worker of role both: even a cached prompt splits.
    expect(plan.decision).toMatchObject({ mode: 'disaggregated', aggregateCachedTokens: null });
    expect((planner.bookDecode(plan.request, admission.worker) as Admission).worker.id).toBe(loaded === 'd0' ? 'd1' : 'd0');
  });

  it('never hands a request to its own prefill worker', () => {
    const { planner, submit } = fleet({ a: 'both', b: 'both' }, { minRemotePrefillTokens: 8 });
    for (let i = 0; i < 4; i++) {
      const { plan, admission } = submit(`r${i}`, tokens(64, 1000 * i + 1));
      expect(plan.decision.mode).toBe('disaggregated');
      const decode = planner.bookDecode(plan.request, admission.worker) as Admission;
      expect(decode.worker.id).not.toBe(admission.worker.id);
    }
  });

  it('no decode worker left: the pick is an error, and nothing is booked for it', () => {
    const { planner, route, submit } = fleet({ p0: 'prefill', d0: 'decode' });
    route.setDraining('d0', true);
    const { plan, admission } = submit('r', tokens(64));
    const decode = planner.bookDecode(plan.request, admission.worker);
    expect(RouterError.is(decode) && decode.code).toBe('KVR_ERR_NO_WORKERS');
    expect(planner.liveDecodes).toBe(0);
    route.aborted('r');
    expect(route.fleet.bookedRequests).toBe(0);
  });

  it('explain shows the decision and both picks, and the decode pick is the one booked', () => {
    const { planner, submit } = fleet({ p0: 'prefill', d0: 'decode', d1: 'decode' });
    const load = submit('load', tokens(200, 5000));
    // One decode worker carries a decode, so the pick is not a tie (ties break at random).
    const loaded = (planner.bookDecode(load.plan.request, load.admission.worker) as Admission).worker.id;
    const x = planner.explain(plainFields('x'), tokens(64, 8000), null);
    expect(x.decision.mode).toBe('disaggregated');
    expect(x.main.chosen).toBe('p0');
    expect(x.main.workers.filter((w) => w.eligible).map((w) => w.worker)).toEqual(['p0']);
    const real = submit('y', tokens(64, 8000));
    const booked = planner.bookDecode(real.plan.request, real.admission.worker) as Admission;
    expect(x.decode!.chosen).toBe(booked.worker.id);
    expect(booked.worker.id).not.toBe(loaded);
    expect(x.decode!.workers.find((w) => w.worker === 'p0')!.eligible).toBe(false);
    const short = planner.explain(plainFields('z'), tokens(8), null);
    expect(short).toMatchObject({ decision: { mode: 'aggregated' }, decode: null });
  });

  it('the ledger sweep keeps a live decode booking and reclaims it once released', () => {
    const clock = new VirtualClock(0);
    const route = new ModelRouter({ model: 'm', blockSize: BLOCK, clock, seed: 1, sweepIntervalMs: 1000, sweepAgeMs: 5000 });
    route.addWorker({ id: 'p', totalBlocks: 100, maxBatchedTokens: 64, taints: roleTaints('prefill', 'vllm') });
    route.addWorker({ id: 'd', totalBlocks: 100, maxBatchedTokens: 64, taints: roleTaints('decode', 'vllm') });
    const planner = new DisaggPlanner(route, { engine: 'vllm', minRemotePrefillTokens: 8, decodePrefixReuse: true });
    let admission: Admission | undefined;
    const plan = planner.submit(plainFields('long'), tokens(32), { dispatch: (a) => (admission = a), reject: () => {} })!;
    planner.bookDecode(plan.request, admission!.worker);
    route.completed('long');
    clock.advanceTo(20_000);
    expect(route.sweepStats.reclaimed).toBe(0);
    expect(route.fleet.bookedRequests).toBe(1);
    planner.close(); // no holder vouches for it any more: a lost release is reclaimed
    clock.advanceTo(22_000);
    expect(route.sweepStats.reclaimed).toBe(1);
    expect(route.fleet.bookedRequests).toBe(0);
    expect(decodeIdOf('long')).toBe('long:decode');
    route.close();
  });
});
