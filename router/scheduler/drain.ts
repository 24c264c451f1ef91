// The drain loop: deficit round robin across classes, each class offering its
// first ready lane's head once the head passes its deadline, the dispatch gate
// and the capacity check; the head picked is admitted (selected and booked)
// and dispatched. A head that cannot go is handed to the wake rule, which
// decides when its lane is looked at again.
import type { WorkerKey } from '../../bindings/workers.js';
import type { Clock } from '../clock.js';
import { RouterError } from '../errors.js';
import type { RequestBook } from './book.js';
import type { BusyThresholds, CapacityVerdict, DispatchGate, GateVerdict, Placement, SchedRequest } from './contracts.js';
import { DeficitRoundRobin, type DrrOffer } from './drr.js';
import type { Entry } from './entry.js';
import type { ClassQueue } from './lanes.js';
import { deadlineError, waitsForCapacity } from './refusals.js';
import type { Timers } from './timers.js';
import { capacityScope, FLEET, type WakeRule } from './wake.js';

export interface DispatcherOptions<R extends SchedRequest> {
  clock: Clock;
  placement: Placement<R>;
  gate: DispatchGate<R> | undefined;
  ring: readonly ClassQueue<Entry<R>>[];
  book: RequestBook<R>;
  wake: WakeRule<Entry<R>>;
  timers: Timers<R>;
}

type Candidate<R extends SchedRequest> = { entry: Entry<R>; target: WorkerKey | null };

export class Dispatcher<R extends SchedRequest> {
  private readonly drr: DeficitRoundRobin<ClassQueue<Entry<R>>>;
  /** Each class's head offered in the current DRR pick, with the gate's target. */
  private readonly offered = new Map<ClassQueue<Entry<R>>, Candidate<R>>();
  private draining = false;
  /** Something changed during this drain: pick again before stopping. */
  private again = false;
  private stopped = false;
  /** Set while the gate answers: a recheck it asks for from inside its own check would spin. */
  inGateCheck = false;

  constructor(private readonly o: DispatcherOptions<R>) {
    this.drr = new DeficitRoundRobin(o.ring);
  }

  /** Dispatches every head that can go now, in DRR and lane order; reentrant calls make it look again. */
  drain(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = true;
    try {
      for (;;) {
        this.o.timers.expireDue();
        if (this.dispatchNext()) continue;
        if (!this.again) break;
        this.again = false;
      }
    } finally {
      this.draining = false;
    }
    this.o.timers.arm();
  }

  stop(): void {
    this.stopped = true;
  }

  private dispatchNext(): boolean {
    const cls = this.drr.pick((c) => {
      const found = this.candidate(c);
      if (typeof found === 'string') return found;
      this.offered.set(c, found);
      return { cost: found.entry.cost };
    });
    if (!cls) return false;
    const { entry, target } = this.offered.get(cls)!;
    const { placement, gate, book, wake } = this.o;
    const lane = cls.lanes.get(entry.lane)!;
    const result = placement.admit(entry.request, entry.allowedWorkers, cls.policy.busy, target, entry.failed);
    if (RouterError.is(result)) {
      if (waitsForCapacity(result)) wake.waitRefused(cls, lane);
      else book.rejectQueued(entry, result);
      return true;
    }
    cls.remove(entry.lane, entry);
    entry.state = 'dispatched';
    entry.worker = result.worker;
    entry.bookedOn = result.worker;
    book.dispatched++;
    if (gate && !entry.gateCommitted) {
      entry.gateCommitted = true;
      if (gate.dispatched(entry, result.worker)) wake.gateChanged();
    }
    this.drr.served(cls, entry.cost, this.nextOffer(cls));
    entry.handlers.dispatch(result);
    return true;
  }

  /** The class's dispatchable head; heads that cannot go are handed to the wake rule. */
  private candidate(cls: ClassQueue<Entry<R>>): Candidate<R> | 'empty' | 'blocked' {
    const { clock, gate, book, wake, timers } = this.o;
    const now = clock.now();
    for (;;) {
      const lane = cls.firstReady();
      if (!lane) return cls.queuedRequests === 0 ? 'empty' : 'blocked';
      const entry = cls.head(lane);
      if (entry.deadline <= now) {
        book.rejectQueued(entry, deadlineError(cls.policy.name, entry.heldOnce ? 'held' : 'dispatch'));
        continue;
      }
      let target: WorkerKey | null = null;
      if (gate && !entry.gateCommitted) {
        const verdict = this.ask(gate, entry, now);
        if (!verdict.go) {
          entry.heldOnce = true;
          // A hold whose until is not in the future waits for the gate to report a change (or the tick).
          const until = verdict.until !== undefined && verdict.until > now ? verdict.until : Infinity;
          wake.waitGate(cls, lane, until);
          if (until !== Infinity) timers.hold(until, lane, cls);
          continue;
        }
        target = verdict.target ?? null;
      }
      // Classes without busy thresholds skip only the capacity check.
      const busy = cls.policy.busy;
      if (busy) {
        const capacity = this.capacity(entry, busy);
        if (capacity === 'busy') {
          wake.waitCapacity(cls, lane, entry.scope!);
          continue;
        }
        if (capacity === 'none') {
          book.rejectQueued(entry, new RouterError('KVR_ERR_NO_WORKERS'));
          continue;
        }
      }
      return { entry, target };
    }
  }

  private ask(gate: DispatchGate<R>, entry: Entry<R>, now: number): GateVerdict {
    this.inGateCheck = true;
    try {
      return gate.check(entry, now);
    } finally {
      this.inGateCheck = false;
    }
  }

  /**
   * A head nothing narrows is checked against the fleet's headroom, without a
   * selection; under a TTFT target the verdict depends on the request's own
   * predicted time to first token, which only a selection tells.
   */
  private capacity(entry: Entry<R>, busy: BusyThresholds): CapacityVerdict {
    const { placement } = this.o;
    entry.scope ??= capacityScope(entry.request, entry.allowedWorkers, entry.failed, placement.constraintKey(entry.request));
    if (entry.scope !== FLEET || !placement.summarizes(busy)) return placement.capacity(entry.request, entry.allowedWorkers, busy, entry.failed);
    if (placement.headroom(busy) > 0) return 'free';
    return placement.liveWorkers() > 0 ? 'busy' : 'none';
  }

  /** What the class offers after serving a head: its next head that can go, so a burst never counts a head that would wait. */
  private nextOffer(cls: ClassQueue<Entry<R>>): DrrOffer {
    const found = this.candidate(cls);
    return typeof found === 'string' ? found : { cost: found.entry.cost };
  }
}
