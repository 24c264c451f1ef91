// npm run bench -- --only scheduler
//
// The admission layer's own cost, apart from worker selection:
// - queue_ops_per_s: enqueue plus dispatch through the Scheduler with 10,000
//   session lanes over 4 policy classes. Every worker is busy while the
//   requests arrive (each lane parks), then capacity frees and the queue drains
//   in DRR order. Run with the wasm lane heap and with its pure-TS twin.
// - drr_arbitrate_ns: one deficit-round-robin arbitration across 16 classes.
import type { LaneHeapApi } from '../bindings/lane-heap.js';
import { LaneHeap } from '../bindings/lane-heap.js';
import { ReferenceLaneHeap } from '../bindings/reference/lane-heap.js';
import { VirtualClock } from '../router/clock.js';
import type { Admission, CapacityVerdict, Placement, PolicyClass, SchedRequest } from '../router/scheduler/contracts.js';
import { DeficitRoundRobin, type DrrClass, type DrrOffer } from '../router/scheduler/drr.js';
import { Scheduler } from '../router/scheduler/scheduler.js';
import { NO_ROWS } from '../router/worker-inputs.js';
import type { BenchSuite, Figure } from './figures.js';
import { median, round } from './stats.js';

/** A placement whose capacity the bench switches, so only the scheduler's work is measured. */
class SwitchPlacement implements Placement {
  busy = true;
  private readonly admission: Admission = { worker: { id: 'w', rank: 0 }, overlapBlocks: 0, cachedTokens: 0 };
  liveWorkers = () => 64;
  cachedTokens = () => 0;
  rows = () => NO_ROWS;
  capacity = (): CapacityVerdict => (this.busy ? 'busy' : 'free');
  headroom = () => (this.busy ? 0 : 64);
  constraintKey = () => '';
  admit = () => this.admission;
  firstToken = () => {};
  release = () => {};
}

const classes: PolicyClass[] = ['interactive', 'batch', 'agents', 'eval'].map((name, i) => ({
  name,
  quantum: 1024 * (i + 1),
  queuePolicy: i % 2 ? 'wspt' : 'fcfs',
  busy: { prefillTokens: 1 },
  queueLimit: { requests: null, tokens: null },
  sloMs: null,
}));

function queueRun(lanes: number, heap: LaneHeapApi): number {
  const placement = new SwitchPlacement();
  const scheduler = new Scheduler({ clock: new VirtualClock(0), placement, classes, laneHeap: heap, laneKeySecret: Buffer.alloc(32, 1) });
  let dispatched = 0;
  const handlers = { dispatch: () => void dispatched++, reject: (e: Error) => { throw e; } };
  const requests: SchedRequest[] = Array.from({ length: lanes }, (_, i) => ({
    id: `q${i}`,
    promptTokens: 100 + (i % 900),
    sessionId: `session-${i}`,
    sessionFinal: false,
    policyClass: classes[i % classes.length]!.name,
    priority: 0,
    tier: 0,
    pin: null,
    allowedWorkers: null,
  }));
  const t0 = process.hrtime.bigint();
  for (const r of requests) scheduler.submit(r, handlers);
  placement.busy = false;
  scheduler.capacityChanged();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (dispatched !== lanes) throw new Error(`dispatched ${dispatched} of ${lanes}`);
  scheduler.close();
  return (2 * lanes) / seconds;
}

function arbitrateNs(classCount: number, rounds: number): number {
  interface C extends DrrClass { cost: number }
  const cs: C[] = Array.from({ length: classCount }, (_, i) => ({ quantum: 512 + 64 * i, deficit: 0, cost: 300 + ((i * 397) % 2000) }));
  const drr = new DeficitRoundRobin(cs);
  const offer = (c: C): DrrOffer => ({ cost: c.cost });
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) {
    const c = drr.pick(offer)!;
    drr.served(c, c.cost, offer(c));
  }
  return Number(process.hrtime.bigint() - t0) / rounds;
}

export const schedulerSuite: BenchSuite = {
  name: 'scheduler',
  async run({ quick }): Promise<Figure[]> {
    const lanes = quick ? 2000 : 10_000;
    const reps = quick ? 3 : 5;
    const wasm: number[] = [];
    const twin: number[] = [];
    // Alternate so both see the same machine noise.
    for (let i = 0; i < reps; i++) {
      wasm.push(queueRun(lanes, new LaneHeap()));
      twin.push(queueRun(lanes, new ReferenceLaneHeap()));
    }
    const drr: number[] = [];
    for (let i = 0; i < reps; i++) drr.push(arbitrateNs(16, quick ? 100_000 : 500_000));
    return [
      { key: 'queue_ops_per_s', value: Math.round(median(wasm)), unit: 'ops/s', note: `enqueue + dispatch, ${lanes} session lanes, 4 classes, wasm lane heap` },
      { key: 'queue_ops_per_s_twin', value: Math.round(median(twin)), unit: 'ops/s', note: 'the same with the pure-TS lane heap' },
      { key: 'queue_speedup_vs_twin', value: round(median(wasm) / median(twin), 1), unit: 'x' },
      { key: 'drr_arbitrate_ns', value: round(median(drr), 1), unit: 'ns', note: 'one arbitration (pick + account) across 16 classes' },
    ];
  },
};
