// A class's TTFT target (busy.ttft_ms): a request whose predicted time to
// first token on its worker is over the target because of the queue ahead
// waits in the router's queue and goes once the queue drains; one that would
// miss the target even on an idle worker goes at once (waiting cannot help);
// past the class's slo_ms a waiting one gets 529. Predictions before any
// first token come from the speed prior: 20 ms + tokens / 48 per ms.
import { afterEach, describe, expect, it } from 'vitest';
import { VirtualClock } from '../../router/clock.js';
import { ModelRouter } from '../../router/model-router.js';
import { plainFields } from '../../router/model-fleet.js';
import type { PolicyClass } from '../../router/scheduler/contracts.js';

const BS = 16;
const tokens = (n: number, seed: number) => Uint32Array.from({ length: n }, (_, i) => seed * 100_000 + i + 1);

function route(targetMs: number, sloMs: number | null = null): { route: ModelRouter; clock: VirtualClock } {
  const clock = new VirtualClock(0);
  const cls: PolicyClass = { name: 'default', quantum: 4096, queuePolicy: 'fcfs', busy: { ttftMs: targetMs }, queueLimit: { requests: null, tokens: null }, sloMs };
  const r = new ModelRouter({ model: 'm', blockSize: BS, clock, seed: 1, classes: [cls], sweepIntervalMs: 0, tickMs: 10 });
  r.addWorker({ id: 'w0', totalBlocks: 100_000, maxBatchedTokens: 8192 });
  return { route: r, clock };
}

const routes: ModelRouter[] = [];
afterEach(() => {
  for (const r of routes.splice(0)) r.close();
});

function submit(r: ModelRouter, id: string, prompt: Uint32Array, outcomes: Map<string, string>): void {
  r.submit(plainFields(id), prompt, {
    dispatch: (admission) => {
      outcomes.set(id, `dispatched:${admission.worker.id}`);
      r.sent(id, admission.worker);
    },
    reject: (error) => outcomes.set(id, `rejected:${error.code}:${error.status}`),
  });
}

describe('a TTFT target', () => {
  it('holds a request whose queue ahead would take it past the target, and sends it when the queue drains', () => {
    // A: 4,800 tokens, alone: 20 + 100 = 120 ms. B: 480 tokens, behind A: 20 + 110 = 130 ms; alone 30 ms.
    const { route: r, clock } = route(100);
    routes.push(r);
    const outcomes = new Map<string, string>();
    submit(r, 'a', tokens(4800, 1), outcomes);
    // A would miss the target on an idle worker too: waiting cannot help it, so it goes.
    expect(outcomes.get('a')).toBe('dispatched:w0');
    submit(r, 'b', tokens(480, 2), outcomes);
    for (let t = 0; t < 20; t++) clock.advanceTo(clock.now() + 10);
    expect(outcomes.has('b')).toBe(false);
    r.firstToken('a');
    for (let t = 0; t < 3; t++) clock.advanceTo(clock.now() + 10);
    expect(outcomes.get('b')).toBe('dispatched:w0');
  });

  it('sends a request at once when its prediction meets the target', () => {
    const { route: r } = route(200);
    routes.push(r);
    const outcomes = new Map<string, string>();
    submit(r, 'a', tokens(4800, 1), outcomes);
    submit(r, 'b', tokens(480, 2), outcomes);
    expect(outcomes.get('b')).toBe('dispatched:w0');
  });

  it("answers 529 once a held request waited past its class's slo_ms", () => {
    const { route: r, clock } = route(100, 300);
    routes.push(r);
    const outcomes = new Map<string, string>();
    submit(r, 'a', tokens(4800, 1), outcomes);
    submit(r, 'b', tokens(480, 2), outcomes);
    for (let t = 0; t < 40 && !outcomes.has('b'); t++) clock.advanceTo(clock.now() + 10);
    expect(outcomes.get('b')).toBe('rejected:KVR_ERR_DEADLINE_EXPIRED:529');
  });
});
