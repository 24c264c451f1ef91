// A decision's JavaScript work and allocation must not grow with the fleet:
// the same request flows (submit: prepare, cached tokens, live workers,
// capacity, admission; completion: first token, release; a retry excluding
// the failed worker; pinned and tainted requests) on idle fleets of 100 and
// 10,000 workers, counted without timing: every element a builtin visits
// (array, typed-array, map and set methods and iterators, spreads), every
// call into the worker slots, and the heap and array-buffer bytes allocated.
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerSlots } from '../../bindings/workers.js';
import { VirtualClock } from '../../router/clock.js';
import { RouterError } from '../../router/errors.js';
import { ModelFleet, plainFields, type RequestFields } from '../../router/model-fleet.js';

const BS = 16;
const BUSY = { prefillTokens: 100_000 };
const prompt = Uint32Array.from({ length: 2048 }, (_, i) => 7 + i);

function fleet(workers: number): ModelFleet {
  const p = new ModelFleet({ model: 'm', blockSize: BS, clock: new VirtualClock(0), seed: 3, fastPathBusy: BUSY });
  for (let w = 0; w < workers; w++) p.addWorker({ id: `w${w}`, totalBlocks: 4096, maxBatchedTokens: 8192, taints: w % 2 === 0 ? ['zone=a'] : [] });
  return p;
}

let n = 0;
/** One request through submit, dispatch and completion, as the scheduler drives the placement. */
function flow(p: ModelFleet, extra: Partial<RequestFields> = {}, retry = false): void {
  const request = p.prepare(plainFields(`r${n++}`, extra), prompt);
  p.cachedTokens(request, request.allowedWorkers);
  p.liveWorkers();
  expect(p.capacity(request, request.allowedWorkers, BUSY)).toBe('free');
  let admission = p.admit(request, request.allowedWorkers, BUSY, null, []);
  if (RouterError.is(admission)) throw admission;
  if (retry) {
    p.release(request.id);
    admission = p.admit(request, request.allowedWorkers, BUSY, null, [admission.worker]);
    if (RouterError.is(admission)) throw admission;
  }
  p.firstToken(request.id);
  p.release(request.id);
}

const FLOWS: [string, (p: ModelFleet) => void][] = [
  ['a plain request', (p) => flow(p)],
  ['required and preferred taints', (p) => flow(p, { requiredTaints: ['zone=a'], preferredTaints: [{ taint: 'zone=a', weight: 0.5 }] })],
  ['a pin', (p) => flow(p, { pin: { id: 'w2', rank: 0 } })],
  ['a retry that excludes the failed worker', (p) => flow(p, {}, true)],
];

// ---- counting ----

type Patch = { target: object; key: PropertyKey; original: unknown };
const patches: Patch[] = [];
let visited = 0;
let slotCalls = 0;

function sizeOf(value: unknown): number {
  if (value instanceof Map || value instanceof Set) return value.size;
  if (value && typeof (value as { length?: unknown }).length === 'number') return (value as { length: number }).length;
  return 0;
}

function count(target: object, key: PropertyKey, measure: (self: unknown, args: unknown[]) => number): void {
  const original = (target as Record<PropertyKey, unknown>)[key];
  if (typeof original !== 'function') return;
  patches.push({ target, key, original });
  Object.defineProperty(target, key, {
    configurable: true,
    writable: true,
    value: function (this: unknown, ...args: unknown[]) {
      visited += measure(this, args);
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    },
  });
}

/** Counts, while installed, the elements builtins walk and the calls into WorkerSlots. */
function install(): void {
  const typed = Object.getPrototypeOf(Uint8Array.prototype) as object;
  for (const key of ['forEach', 'map', 'filter', 'reduce', 'some', 'every', 'find', 'findIndex', 'includes', 'indexOf', 'slice', 'concat', 'join', 'sort', 'fill', 'flat', 'flatMap', 'splice', Symbol.iterator, 'entries', 'values', 'keys']) {
    count(Array.prototype, key, (self) => sizeOf(self));
  }
  for (const key of ['fill', 'slice', 'map', 'filter', 'forEach', 'includes', 'indexOf', 'every', 'some', 'reduce', 'sort', 'copyWithin', 'join', Symbol.iterator, 'entries', 'values', 'keys']) {
    count(typed, key, (self) => sizeOf(self));
  }
  count(typed, 'set', (_self, args) => sizeOf(args[0]));
  count(Array, 'from', (_self, args) => sizeOf(args[0]));
  for (const C of [Uint8Array, Uint32Array, Float64Array, BigUint64Array]) count(C, 'from', (_self, args) => sizeOf(args[0]));
  for (const proto of [Map.prototype, Set.prototype]) {
    for (const key of ['forEach', 'entries', 'values', 'keys', Symbol.iterator]) count(proto, key, (self) => sizeOf(self));
  }
  for (const key of Object.getOwnPropertyNames(WorkerSlots.prototype)) {
    if (key === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(WorkerSlots.prototype, key)!;
    if (typeof descriptor.value !== 'function') continue;
    const original = descriptor.value as (...a: unknown[]) => unknown;
    patches.push({ target: WorkerSlots.prototype, key, original });
    Object.defineProperty(WorkerSlots.prototype, key, {
      configurable: true,
      writable: true,
      value: function (this: unknown, ...args: unknown[]) {
        slotCalls++;
        return original.apply(this, args);
      },
    });
  }
}

function uninstall(): void {
  for (const { target, key, original } of patches.splice(0).reverse()) {
    Object.defineProperty(target, key, { configurable: true, writable: true, value: original });
  }
}

afterEach(uninstall);

/** Elements visited and slot calls of `runs` flows, after a warm-up outside the count. */
function work(p: ModelFleet, step: (p: ModelFleet) => void, runs: number): { visited: number; slotCalls: number } {
  for (let i = 0; i < 50; i++) step(p);
  visited = 0;
  slotCalls = 0;
  install();
  try {
    for (let i = 0; i < runs; i++) step(p);
  } finally {
    uninstall();
  }
  return { visited, slotCalls };
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Bytes in the young generation (where new objects go; it only grows until the next collection). */
function youngBytes(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_used_size;
}

/**
 * Young-generation and array-buffer bytes allocated by `runs` flows, after a
 * collection. A collection during a window can only make it read less than
 * was allocated, never more, so the largest of several windows is the
 * allocation (a window without a collection reads it exactly).
 */
function allocated(p: ModelFleet, step: (p: ModelFleet) => void, runs: number): number {
  for (let i = 0; i < 2000; i++) step(p);
  let most = 0;
  for (let window = 0; window < 6; window++) {
    gc();
    const young = youngBytes();
    const buffers = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < runs; i++) step(p);
    most = Math.max(most, youngBytes() - young + (process.memoryUsage().arrayBuffers - buffers));
  }
  return most;
}

describe('ModelFleet: per-request work does not grow with the fleet', () => {
  const small = fleet(100);
  const large = fleet(10_000);

  for (const [name, step] of FLOWS) {
    it(`${name}: the same builtin element visits and worker-slot calls on 10,000 idle workers as on 100`, () => {
      const a = work(small, step, 20);
      const b = work(large, step, 20);
      // Something per request is walked (the prompt's hashes, a pin's list): far below one fleet.
      expect(a.visited).toBeLessThan(20 * 10_000);
      expect(b).toEqual(a);
    });
  }

  it('allocates no more per request on 10,000 idle workers than on 100', () => {
    const runs = 20;
    const step = FLOWS[1]![1];
    const a = allocated(small, step, runs);
    const b = allocated(large, step, runs);
    // Prompts' hashes share 32 KiB buffers, so a window may take one more than
    // the other; one fleet-sized array per request would add 10,000 bytes or
    // more each time (200 KB over the window).
    expect(b).toBeLessThan(a + 64 * 1024);
  });
});
