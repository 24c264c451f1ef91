import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KvEventBatch } from '../../router/kv-events.js';
import { IndexFailure } from '../../bindings/prefix-index-api.js';
import { RESYNC_SPACING, type SequencedBatch, type SequencerOptions, WorkerSequencer, describeStale } from '../../server/kv-events/sequencer.js';

// A batch whose ts carries its sequence number, so the test can tell which batch was applied.
const batchOf = (seq: number): KvEventBatch => ({ ts: seq, events: [], dpRank: null });
const items = (...seqs: number[]): SequencedBatch[] => seqs.map((seq) => ({ seq, batch: batchOf(seq) }));

function harness(options: SequencerOptions) {
  const log: string[] = [];
  const applied: number[] = [];
  const requests: { fromSeq: number; ticket: number }[] = [];
  const sequencer = new WorkerSequencer(
    {
      apply: (batch, seq, replayed) => {
        expect(batch.ts).toBe(seq);
        applied.push(seq);
        log.push(`apply ${seq}${replayed ? ' (replayed)' : ''}`);
      },
      stale: (r) => log.push(`stale ${r.kind} expected ${r.expectedSeq} got ${r.receivedSeq} replay ${r.replay}`),
      requestReplay: (fromSeq, ticket) => {
        requests.push({ fromSeq, ticket });
        log.push(`replay from ${fromSeq}`);
      },
    },
    options,
  );
  const offer = (...seqs: number[]) => seqs.forEach((seq) => sequencer.offer(seq, batchOf(seq)));
  return { sequencer, log, applied, requests, offer };
}

describe('WorkerSequencer without replay', () => {
  it('applies consecutive batches and takes the first one seen as the baseline', () => {
    const h = harness({ replay: false });
    h.offer(5, 6, 7);
    expect(h.log).toEqual(['apply 5', 'apply 6', 'apply 7']);
    expect(h.sequencer.lastSeq).toBe(7);
  });

  it('a gap is reported stale before the batch after it is applied', () => {
    const h = harness({ replay: false });
    h.offer(0, 1, 4, 5);
    expect(h.log).toEqual(['apply 0', 'apply 1', 'stale gap expected 2 got 4 replay not-configured', 'apply 4', 'apply 5']);
    expect(h.sequencer.counters).toMatchObject({ gaps: 1, staleReports: 1, replayRequests: 0 });
  });

  it('a sequence number going back is a publisher restart: reported, then the new baseline', () => {
    const h = harness({ replay: false });
    h.offer(0, 1, 2, 0, 1);
    expect(h.log).toEqual(['apply 0', 'apply 1', 'apply 2', 'stale restart expected 3 got 0 replay null', 'apply 0', 'apply 1']);
    expect(h.sequencer.counters.restarts).toBe(1);
  });

  it('a repeated sequence number is a restart too (the old publisher never repeats one)', () => {
    const h = harness({ replay: false });
    h.offer(3, 4, 4);
    expect(h.log.at(-2)).toBe('stale restart expected 5 got 4 replay null');
  });
});

describe('WorkerSequencer with replay', () => {
  it('a gap asks for replay from the missing seq and holds live batches until the answer', () => {
    const h = harness({ replay: true });
    h.offer(0, 1, 4, 5);
    expect(h.log).toEqual(['apply 0', 'apply 1', 'replay from 2']);
    expect(h.sequencer.replaying).toBe(true);
    h.sequencer.replayed(h.requests[0]!.ticket, items(2, 3, 4), 'complete');
    h.offer(6);
    expect(h.applied).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(h.log).not.toContain(expect.stringContaining('stale'));
    expect(h.sequencer.counters).toMatchObject({ gaps: 1, replayedBatches: 2, staleReports: 0 });
  });

  it('replayed batches also held live are applied once, from the live copy', () => {
    const h = harness({ replay: true });
    h.offer(0, 3, 4);
    h.sequencer.replayed(h.requests[0]!.ticket, items(1, 2, 3, 4, 5), 'complete');
    expect(h.log).toEqual([
      'apply 0',
      'replay from 1',
      'apply 1 (replayed)',
      'apply 2 (replayed)',
      'apply 3',
      'apply 4',
      'apply 5 (replayed)',
    ]);
  });

  it('batches the engine no longer buffers are reported stale, then the stream continues', () => {
    const h = harness({ replay: true });
    h.offer(0, 1, 9);
    h.sequencer.replayed(h.requests[0]!.ticket, items(5, 6, 7, 8, 9), 'complete');
    expect(h.log.slice(2)).toEqual([
      'replay from 2',
      'stale gap expected 2 got 5 replay incomplete',
      'apply 5 (replayed)',
      'apply 6 (replayed)',
      'apply 7 (replayed)',
      'apply 8 (replayed)',
      'apply 9',
    ]);
  });

  it('a failed replay reports the gap as failed and applies what it has', () => {
    const h = harness({ replay: true });
    h.offer(0, 3, 4);
    h.sequencer.replayed(h.requests[0]!.ticket, items(1), 'failed');
    expect(h.log).toEqual(['apply 0', 'replay from 1', 'apply 1 (replayed)', 'stale gap expected 2 got 3 replay failed', 'apply 3', 'apply 4']);
  });

  it('a hole the replay could not have known about asks for another replay', () => {
    const h = harness({ replay: true });
    h.offer(0, 2, 3, 5);
    // Served when 3 was the newest batch; 4 was then dropped live.
    h.sequencer.replayed(h.requests[0]!.ticket, items(1, 2, 3), 'complete');
    expect(h.log.slice(-2)).toEqual(['apply 3', 'replay from 4']);
    h.sequencer.replayed(h.requests[1]!.ticket, items(4, 5), 'complete');
    expect(h.applied).toEqual([0, 1, 2, 3, 4, 5]);
    expect(h.sequencer.counters).toMatchObject({ gaps: 2, replayRequests: 2, staleReports: 0 });
  });

  it('no second replay when the first one made no progress', () => {
    const h = harness({ replay: true });
    h.offer(0, 5);
    h.sequencer.replayed(h.requests[0]!.ticket, [], 'complete');
    expect(h.requests).toHaveLength(1);
    expect(h.log.slice(-2)).toEqual(['stale gap expected 1 got 5 replay incomplete', 'apply 5']);
  });

  it('joining past seq 0 fetches the buffered history first and reports no stale hole before it', () => {
    const h = harness({ replay: true });
    h.offer(7, 8);
    expect(h.requests[0]!.fromSeq).toBe(0);
    h.sequencer.replayed(h.requests[0]!.ticket, items(4, 5, 6, 7), 'complete');
    expect(h.applied).toEqual([4, 5, 6, 7, 8]);
    expect(h.sequencer.counters.staleReports).toBe(0);
  });

  it('replayOnJoin false takes the first batch as the baseline', () => {
    const h = harness({ replay: true, replayOnJoin: false });
    h.offer(7, 8);
    expect(h.requests).toHaveLength(0);
    expect(h.applied).toEqual([7, 8]);
  });

  it('a restart during a replay abandons it; its late answer is ignored', () => {
    const h = harness({ replay: true });
    h.offer(0, 1, 5, 6, 0);
    expect(h.log).toEqual(['apply 0', 'apply 1', 'replay from 2', 'stale restart expected 7 got 0 replay null', 'apply 0']);
    h.sequencer.replayed(h.requests[0]!.ticket, items(2, 3, 4), 'complete');
    h.offer(1);
    expect(h.applied).toEqual([0, 1, 0, 1]);
    expect(h.sequencer.replaying).toBe(false);
  });

  it('live batches past maxHeld are dropped and counted; the next live batch finds the hole and replays it', () => {
    const h = harness({ replay: true, maxHeld: 2 });
    h.offer(0, 2, 3, 4, 5);
    expect(h.sequencer.counters.heldDropped).toBe(2);
    // Served before 4 and 5 were published.
    h.sequencer.replayed(h.requests[0]!.ticket, items(1, 2, 3), 'complete');
    expect(h.applied).toEqual([0, 1, 2, 3]);
    h.offer(6);
    expect(h.requests.at(-1)!.fromSeq).toBe(4);
    h.sequencer.replayed(h.requests.at(-1)!.ticket, items(4, 5, 6), 'complete');
    expect(h.applied).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(h.sequencer.counters.staleReports).toBe(0);
  });
});

describe('WorkerSequencer properties', () => {
  // A publisher numbering batches 0..n-1 with a replay ring of `buffer` batches;
  // each batch reaches the subscriber live or not. A replay request is served
  // (the ring read) a few publications later and its answer processed a few
  // more later, so live batches can be dropped between the two.
  const scenario = fc.record({
    live: fc.array(fc.boolean(), { minLength: 1, maxLength: 60 }),
    buffer: fc.integer({ min: 1, max: 80 }),
    delays: fc.array(fc.tuple(fc.nat(3), fc.nat(3)), { minLength: 1, maxLength: 8 }),
    maxHeld: fc.integer({ min: 1, max: 80 }),
  });

  interface Answer {
    ticket: number;
    fromSeq: number;
    serveAt: number;
    processAt: number;
    served?: SequencedBatch[];
  }

  function run({ live, buffer, delays, maxHeld }: { live: boolean[]; buffer: number; delays: [number, number][]; maxHeld: number }) {
    const h = harness({ replay: true, maxHeld });
    const answers: Answer[] = [];
    let published = 0;
    let seen = 0;
    const ring = (fromSeq: number) => {
      const seqs = [];
      for (let seq = Math.max(fromSeq, published - buffer); seq < published; seq++) seqs.push(seq);
      return items(...seqs);
    };
    const pump = (flush: boolean) => {
      while (seen < h.requests.length) {
        const [serve, process] = delays[seen % delays.length]!;
        const r = h.requests[seen++]!;
        answers.push({ ...r, serveAt: published + serve, processAt: published + serve + process });
      }
      for (const a of answers) if (!a.served && (flush || a.serveAt <= published)) a.served = ring(a.fromSeq);
      for (let i = 0; i < answers.length; i++) {
        const a = answers[i]!;
        if (a.served && (flush || a.processAt <= published)) {
          answers.splice(i--, 1);
          h.sequencer.replayed(a.ticket, a.served, 'complete');
        }
      }
    };
    for (let seq = 0; seq < live.length; seq++) {
      published = seq + 1;
      if (live[seq]) h.offer(seq);
      pump(false);
    }
    for (let rounds = 0; answers.length > 0 || seen < h.requests.length; rounds++) {
      expect(rounds).toBeLessThan(100);
      pump(true);
    }
    const stale: { expected: number; got: number }[] = [];
    const staleAt: number[] = [];
    let appliedSoFar = 0;
    for (const line of h.log) {
      if (line.startsWith('apply')) appliedSoFar++;
      const m = /stale gap expected (\d+) got (\d+)/.exec(line);
      if (m) {
        stale.push({ expected: Number(m[1]), got: Number(m[2]) });
        staleAt.push(appliedSoFar);
      }
    }
    return { h, stale, staleAt };
  }

  it('applied numbers only increase, every hole is reported stale just before the batch after it, and nothing else is', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { h, stale, staleAt } = run(s);
        const holes: { expected: number; got: number; at: number }[] = [];
        for (let i = 1; i < h.applied.length; i++) {
          expect(h.applied[i]!).toBeGreaterThan(h.applied[i - 1]!);
          if (h.applied[i] !== h.applied[i - 1]! + 1) holes.push({ expected: h.applied[i - 1]! + 1, got: h.applied[i]!, at: i });
        }
        expect(stale).toEqual(holes.map(({ expected, got }) => ({ expected, got })));
        expect(staleAt).toEqual(holes.map(({ at }) => at));
      }),
      { numRuns: 300 },
    );
  });

  it('when the ring outlasts the stream and nothing is dropped, every batch up to the newest seen is applied with no stale report', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const lastLive = s.live.lastIndexOf(true);
        fc.pre(lastLive >= 0 && s.buffer >= s.live.length && s.maxHeld >= s.live.length);
        const { h, stale } = run(s);
        expect(stale).toEqual([]);
        expect(h.applied.length).toBeGreaterThan(lastLive);
        expect(h.applied).toEqual(h.applied.map((_, i) => i));
      }),
      { numRuns: 300 },
    );
  });
});

describe('WorkerSequencer when the router cannot apply a batch', () => {
  /** A sink whose apply answers with an IndexFailure for the listed sequence numbers. */
  function failing(options: SequencerOptions, failAt: Map<number, IndexFailure['kind']>) {
    const log: string[] = [];
    const requests: { fromSeq: number; ticket: number }[] = [];
    const sequencer = new WorkerSequencer(
      {
        apply: (_batch, seq, replayed) => {
          log.push(`apply ${seq}${replayed ? ' (replayed)' : ''}`);
          const kind = failAt.get(seq);
          if (!kind) return null;
          failAt.delete(seq);
          return new IndexFailure(kind, [{ id: 'w', rank: 0 }], `failure at ${seq}`);
        },
        stale: (r) => log.push(`stale ${r.kind} at ${r.receivedSeq} replay ${r.replay}: ${describeStale(r)}`),
        requestReplay: (fromSeq, ticket) => {
          requests.push({ fromSeq, ticket });
          log.push(`replay from ${fromSeq}`);
        },
      },
      options,
    );
    const offer = (...seqs: number[]) => seqs.forEach((seq) => sequencer.offer(seq, batchOf(seq)));
    return { sequencer, log, requests, offer };
  }

  it('an index failure without replay is reported stale once and the stream goes on', () => {
    const h = failing({ replay: false }, new Map([[1, 'no-memory']]));
    h.offer(0, 1, 2);
    expect(h.log).toEqual([
      'apply 0',
      'apply 1',
      'stale index at 1 replay not-configured: KV batch 1 could not be applied: failure at 1; the stream is stale from there',
      'apply 2',
    ]);
    expect(h.sequencer.counters).toMatchObject({ indexFailures: 1, staleReports: 1, resyncs: 0 });
  });

  it('with replay, an index failure resynchronises: the engine buffer is replayed from 0 onto the cleared worker', () => {
    const h = failing({ replay: true, replayOnJoin: false }, new Map([[6, 'trap']]));
    h.offer(5, 6, 7, 8);
    expect(h.log).toEqual(['apply 5', 'apply 6', 'stale index at 6 replay null: KV batch 6 could not be applied: failure at 6; the stream is stale from there', 'replay from 0']);
    // The engine still buffers 3..6; 7 and 8 arrived live meanwhile.
    h.sequencer.replayed(h.requests[0]!.ticket, items(3, 4, 5, 6), 'complete');
    expect(h.log.slice(4)).toEqual(['apply 3 (replayed)', 'apply 4 (replayed)', 'apply 5 (replayed)', 'apply 6 (replayed)', 'apply 7', 'apply 8']);
    expect(h.sequencer.counters).toMatchObject({ indexFailures: 1, resyncs: 1, staleReports: 1 });
    expect(h.sequencer.lastSeq).toBe(8);
  });

  it('resynchronises at most once per RESYNC_SPACING applied batches', () => {
    const fails = new Map<number, IndexFailure['kind']>([[1, 'no-memory'], [3, 'no-memory'], [RESYNC_SPACING + 10, 'no-memory']]);
    const h = failing({ replay: true, replayOnJoin: false }, fails);
    h.offer(0, 1);
    h.sequencer.replayed(h.requests[0]!.ticket, items(0, 1), 'complete');
    h.offer(2, 3);
    expect(h.sequencer.counters).toMatchObject({ indexFailures: 2, resyncs: 1 });
    expect(h.log.at(-1)).toMatch(/stale index at 3 replay failed/);
    for (let seq = 4; seq <= RESYNC_SPACING + 10; seq++) h.offer(seq);
    expect(h.sequencer.counters).toMatchObject({ indexFailures: 3, resyncs: 2 });
  });

  it('a batch for a worker the router no longer has retires the stream: reported once, the rest dropped', () => {
    const h = failing({ replay: true, replayOnJoin: false }, new Map([[2, 'unknown-worker']]));
    h.offer(1, 2, 3, 4);
    expect(h.log).toEqual([
      'apply 1',
      'apply 2',
      'stale removed at 2 replay null: KV batch 2 arrived after the worker was removed (failure at 2); its stream is retired',
    ]);
    expect(h.sequencer.counters).toMatchObject({ retiredDropped: 2, staleReports: 1, replayRequests: 0 });
  });
});
