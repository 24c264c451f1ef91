// npm run bench -- --only scheduler
//
// The admission layer's own cost, apart from worker selection:
// - queue_ops_per_s: enqueue plus dispatch through the Scheduler with 10,000
//   session lanes over 4 policy classes. Every worker is busy while the
//   requests arrive (each lane parks), then capacity frees and the queue drains
//   in DRR order. Run with the wasm lane heap and with its pure-TS twin.
// - drr_arbitrate_ns: one deficit-round-robin arbitration across 16 classes.
// - wake_cost_us_per_event_10k_waiting: overload. 10,000 sessions wait in
//   lanes of two busy classes (one in ten pinned to a worker) in front of a
//   saturated fleet (a ModelFleet on the wasm core, 256 workers), and a stream
//   of capacity changes (first tokens, completions, aborts, ticks) arrives.
//   The cost of one change is the scheduler's CPU time for it minus the
//   admissions it makes (selection and booking of the heads that go, the same
//   under any wake rule); _with_admissions keeps them in. Measured for the
//   targeted wake rule and for rechecking every lane, side by side.
// - event_loop_p99_ms_10k_waiting: the same stream on a real clock, 4 changes
//   per millisecond, with perf_hooks.monitorEventLoopDelay watching the loop.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { LaneHeapApi } from '../bindings/lane-heap.js';
import { LaneHeap } from '../bindings/lane-heap.js';
import { ReferenceLaneHeap } from '../bindings/reference/lane-heap.js';
import type { WorkerKey } from '../bindings/workers.js';
import { RealClock, VirtualClock, type Clock } from '../router/clock.js';
import type { RouterError } from '../router/errors.js';
import { ModelFleet, plainFields, type RoutedRequest } from '../router/model-fleet.js';
import type { Admission, BusyThresholds, CapacityVerdict, Placement, PolicyClass, SchedRequest } from '../router/scheduler/contracts.js';
import { DeficitRoundRobin, type DrrClass, type DrrOffer } from '../router/scheduler/drr.js';
import { Scheduler } from '../router/scheduler/scheduler.js';
import { NO_ROWS, type WorkerInputMask, type WorkerRows } from '../router/worker-inputs.js';
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
  summarizes = () => true;
  headroom = () => (this.busy ? 0 : 64);
  busyFor = () => this.busy;
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

// ---- overload: the cost of a capacity change with 10,000 sessions waiting ----

const FLEET = 256;
const BLOCK_SIZE = 16;
const noLimit = { requests: null, tokens: null };
const OVERLOAD_CLASSES: PolicyClass[] = [
  { name: 'interactive', quantum: 4096, queuePolicy: 'fcfs', busy: { prefillTokens: 8192, decodeFraction: 0.85 }, queueLimit: noLimit, sloMs: null },
  { name: 'batch', quantum: 1024, queuePolicy: 'wspt', busy: { prefillTokens: 4096, decodeFraction: 0.7 }, queueLimit: noLimit, sloMs: null },
];

/** The model fleet as the scheduler's placement, timing its admissions (the part every wake rule pays alike). */
class TimedPlacement implements Placement<RoutedRequest> {
  admitMicros = 0;
  constructor(private readonly p: ModelFleet) {}
  liveWorkers = () => this.p.liveWorkers();
  cachedTokens = (r: RoutedRequest, a: readonly WorkerKey[] | null) => this.p.cachedTokens(r, a);
  rows = (r: RoutedRequest, a: readonly WorkerKey[] | null, i: WorkerInputMask): WorkerRows => this.p.rows(r, a, i);
  capacity = (r: RoutedRequest, a: readonly WorkerKey[] | null, b: BusyThresholds | null, e: readonly WorkerKey[]) => this.p.capacity(r, a, b, e);
  summarizes = (b: BusyThresholds) => this.p.summarizes(b);
  headroom = (b: BusyThresholds) => this.p.headroom(b);
  busyFor = (w: WorkerKey, b: BusyThresholds) => this.p.busyFor(w, b);
  constraintKey = (r: RoutedRequest) => this.p.constraintKey(r);
  workerCapacities = () => this.p.workerCapacities();
  firstToken = (id: string) => this.p.firstToken(id);
  release = (id: string) => this.p.release(id);
  admit = (r: RoutedRequest, a: readonly WorkerKey[] | null, b: BusyThresholds | null, t: WorkerKey | null, e: readonly WorkerKey[]): Admission | RouterError => {
    const start = process.cpuUsage();
    const result = this.p.admit(r, a, b, t, e);
    this.admitMicros += cpuMicros(start);
    return result;
  };
}

/** A saturated fleet with `waiting` sessions queued, and the capacity changes that arrive at it. */
class Overload {
  readonly placement: TimedPlacement;
  readonly scheduler: Scheduler<RoutedRequest>;
  dispatched = 0;
  private readonly fleet: ModelFleet;
  private readonly prefilling: string[] = [];
  private readonly decoding: string[] = [];
  private requests = 0;
  private readonly prompt = new Uint32Array(256 + 1800);
  private lcg = 12345;
  private readonly handlers = (id: string) => ({
    dispatch: () => {
      this.dispatched++;
      this.prefilling.push(id);
    },
    reject: (error: RouterError) => {
      if (!this.closed) throw error;
    },
  });
  private closed = false;

  constructor(
    clock: Clock,
    wake: 'targeted' | 'everything',
    private readonly waiting: number,
  ) {
    this.fleet = new ModelFleet({ model: 'bench', blockSize: BLOCK_SIZE, clock, seed: 7, fastPathBusy: OVERLOAD_CLASSES[0]!.busy });
    for (let i = 0; i < FLEET; i++) this.fleet.addWorker({ id: `w${i}`, totalBlocks: 2048, maxBatchedTokens: 8192 });
    this.placement = new TimedPlacement(this.fleet);
    this.scheduler = new Scheduler({ clock, placement: this.placement, classes: OVERLOAD_CLASSES, wake, laneKeySecret: Buffer.alloc(32, 5) });
    this.refill();
  }

  /** Every request is dispatched in the end (aborts and completions come after): the rest wait. */
  get queued(): number {
    return this.requests - this.dispatched;
  }

  /** Submits new sessions until `waiting` wait (the fleet fills first). */
  refill(): void {
    while (this.queued < this.waiting) {
      const n = this.requests++;
      // Prompts are hashed at prepare and not kept: one buffer serves them all, so the harness adds little to the collector's work.
      const tokens = this.prompt.subarray(0, 256 + ((n * 613) % 1800));
      for (let i = 0; i < tokens.length; i++) tokens[i] = (n * 7919 + i * 104_729) % 150_000;
      const id = `r${n}`;
      // One session in ten is pinned to a worker: those wait in per-worker groups.
      const pin = n % 10 === 9 ? { id: `w${(n * 7) % FLEET}`, rank: 0 } : null;
      const request = this.fleet.prepare(plainFields(id, { sessionId: `session-${n}`, policyClass: OVERLOAD_CLASSES[n % 2]!.name, pin }), tokens);
      this.scheduler.submit(request, this.handlers(id));
    }
  }

  /** One capacity change: mostly first tokens and completions, some aborts and (with `tick`) ticks. */
  change(tick: (() => void) | null): void {
    const roll = this.next() % 100;
    if (roll < 3) return tick?.();
    const from = roll < 50 ? this.prefilling : this.decoding;
    const list = from.length > 0 ? from : this.prefilling.length > 0 ? this.prefilling : this.decoding;
    const at = this.next() % list.length;
    const id = list[at]!;
    list[at] = list[list.length - 1]!;
    list.pop();
    if (list === this.prefilling && roll < 95) {
      this.scheduler.firstToken(id);
      this.decoding.push(id);
    } else if (roll < 95) this.scheduler.completed(id);
    else this.scheduler.aborted(id);
  }

  close(): void {
    this.closed = true;
    this.scheduler.close();
  }

  private next(): number {
    this.lcg = (Math.imul(this.lcg, 1_103_515_245) + 12_345) >>> 0;
    return this.lcg >>> 8;
  }
}

interface WakeCost {
  /** Scheduler CPU time per change, admissions taken out (us). */
  micros: number;
  /** The same with admissions in (us). */
  withAdmissions: number;
  dispatchedPerChange: number;
}

/**
 * The scheduler's own cost per capacity change, in microseconds of CPU time:
 * on a machine shared with other work, wall time would count the time the
 * process waits for a core.
 */
async function wakeCostMicros(wake: 'targeted' | 'everything', waiting: number, changes: number): Promise<WakeCost> {
  const clock = new VirtualClock(0);
  const run = new Overload(clock, wake, waiting);
  let cpu = 0;
  let admit = 0;
  let dispatched = 0;
  for (let i = 0; i < changes; i++) {
    const before = { admit: run.placement.admitMicros, dispatched: run.dispatched };
    const start = process.cpuUsage();
    run.change(() => clock.advanceTo(clock.now() + 1000));
    cpu += cpuMicros(start);
    admit += run.placement.admitMicros - before.admit;
    dispatched += run.dispatched - before.dispatched;
    run.refill();
  }
  run.close();
  return { micros: (cpu - admit) / changes, withAdmissions: cpu / changes, dispatchedPerChange: dispatched / changes };
}

/** CPU time (user and system) since `start`, in microseconds. */
function cpuMicros(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

/** The event loop's p99 delay (ms) while changes arrive on a real clock, `perMs` per millisecond for `ms`. */
async function loopLagP99Ms(wake: 'targeted' | 'everything', waiting: number, perMs: number, ms: number): Promise<number> {
  const run = new Overload(new RealClock(), wake, waiting);
  const lag = monitorEventLoopDelay({ resolution: 1 });
  lag.enable();
  const end = performance.now() + ms;
  await new Promise<void>((resolve) => {
    const step = () => {
      for (let i = 0; i < perMs; i++) run.change(null);
      run.refill();
      if (performance.now() < end) setTimeout(step, 1);
      else resolve();
    };
    setTimeout(step, 1);
  });
  lag.disable();
  run.close();
  return lag.percentile(99) / 1e6;
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
    const waiting = quick ? 2000 : 10_000;
    const targeted: number[] = [];
    const withAdmissions: number[] = [];
    const everything: number[] = [];
    let perChange = 0;
    for (let i = 0; i < reps; i++) {
      const t = await wakeCostMicros('targeted', waiting, quick ? 2000 : 5000);
      targeted.push(t.micros);
      withAdmissions.push(t.withAdmissions);
      perChange = t.dispatchedPerChange;
      everything.push((await wakeCostMicros('everything', waiting, quick ? 20 : 60)).micros);
    }
    const lagTargeted: number[] = [];
    const lagEverything: number[] = [];
    for (let i = 0; i < (quick ? 1 : 3); i++) {
      lagTargeted.push(await loopLagP99Ms('targeted', waiting, 4, quick ? 1000 : 3000));
      lagEverything.push(await loopLagP99Ms('everything', waiting, 4, quick ? 1000 : 3000));
    }
    return [
      { key: 'queue_ops_per_s', value: Math.round(median(wasm)), unit: 'ops/s', note: `enqueue + dispatch, ${lanes} session lanes, 4 classes, wasm lane heap` },
      { key: 'queue_ops_per_s_twin', value: Math.round(median(twin)), unit: 'ops/s', note: 'the same with the pure-TS lane heap' },
      { key: 'queue_speedup_vs_twin', value: round(median(wasm) / median(twin), 1), unit: 'x' },
      { key: 'drr_arbitrate_ns', value: round(median(drr), 1), unit: 'ns', note: 'one arbitration (pick + account) across 16 classes' },
      {
        key: 'wake_cost_us_per_event_10k_waiting',
        value: round(median(targeted), 2),
        unit: 'us',
        goal: '<= 50',
        note: `scheduler CPU time per capacity change minus its admissions, ${waiting} sessions waiting (one in ten pinned), ${FLEET} workers, targeted wake; ${round(perChange, 2)} dispatches per change`,
      },
      { key: 'wake_cost_us_per_event_10k_waiting_with_admissions', value: round(median(withAdmissions), 2), unit: 'us', note: 'the same, admissions (selection and booking of the heads that go) included' },
      { key: 'wake_cost_us_per_event_10k_waiting_recheck_all', value: round(median(everything), 1), unit: 'us', note: 'the same changes, every waiting lane rechecked' },
      { key: 'wake_cost_ratio_recheck_all', value: round(median(everything) / median(targeted), 0), unit: 'x' },
      { key: 'event_loop_p99_ms_10k_waiting', value: round(median(lagTargeted), 2), unit: 'ms', goal: '<= 20', note: '4 capacity changes per ms on a real clock, monitorEventLoopDelay p99, targeted wake' },
      { key: 'event_loop_p99_ms_10k_waiting_recheck_all', value: round(median(lagEverything), 1), unit: 'ms', note: 'the same, every waiting lane rechecked' },
    ];
  },
};
