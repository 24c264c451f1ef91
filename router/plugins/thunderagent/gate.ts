// ThunderAgent's dispatch gate: answers per queue head from the program
// ledger and the workers' live KV capacity, and commits a turn when it leaves
// the queue (pausing programs on a worker its turn pushed over the threshold).
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';
import type { DispatchGate, GateHandle, GateVerdict, QueuedHead, SchedRequest, WorkerCapacity } from '../../scheduler/contracts.js';
import type { Program, ProgramLedger } from './ledger.js';
import type { ThunderAgentOptions } from './options.js';

/** A worker's room as one check sees it: capacity and charged usage in tokens (programs past retention left out). */
interface Room {
  readonly key: WorkerKey;
  readonly capacity: number;
  readonly used: number;
}

const GO: GateVerdict = Object.freeze({ go: true });

export class ProgramGate<R extends SchedRequest = SchedRequest> implements DispatchGate<R> {
  /** The rooms of the last check, reused while the workers, the ledger and the time are unchanged. */
  private cached: { workers: readonly WorkerCapacity[]; version: number; now: number; rooms: Map<string, Room> } | undefined;

  constructor(
    private readonly ledger: ProgramLedger,
    private readonly options: ThunderAgentOptions,
    private readonly handle: GateHandle,
  ) {}

  check(head: QueuedHead<R>, now: number): GateVerdict {
    const session = head.request.sessionId;
    if (session === null) return GO; // not a program
    // T5: no turn waits on the gate past resume_timeout from its registration.
    const forcedAt = (this.ledger.registeredAt(head.request.id) ?? head.arrival) + this.options.resumeTimeoutMs;
    const program = this.ledger.live(session, now);
    const rooms = this.rooms(now);
    const candidates = this.candidates(head, rooms);
    const home = program?.worker ? candidates.find((r) => workerLabel(r.key) === workerLabel(program.worker!)) : undefined;
    // T2: one turn in flight per session.
    if (program && program.inflight.size > 0) return now >= forcedAt ? go(home) : { go: false, until: forcedAt };
    // No known worker to budget against: the scheduler's own checks decide.
    if (candidates.length === 0) return GO;
    // T3: a continuing turn of an active program goes to the worker holding its context.
    if (program && !program.paused && home) return go(home);
    const fit = this.fit(program, head.request.promptTokens, candidates, home);
    if (fit) return go(fit);
    if (now >= forcedAt) return go(home ?? mostHeadroom(candidates));
    // T8: an idle program passing retention frees its charge: look again then at the latest.
    return { go: false, until: Math.min(forcedAt, this.ledger.nextExpiry(now)) };
  }

  dispatched(head: QueuedHead<R>, worker: WorkerKey): boolean {
    const session = head.request.sessionId;
    if (session === null) return false;
    const now = this.handle.now();
    this.ledger.settle(now);
    const created = this.ledger.startTurn(head.request.id, session, worker, head.request.promptTokens, head.request.sessionFinal, now);
    // T9: above the program limit the longest-idle program goes.
    const evicted = created ? this.ledger.evictOver(this.options.maxPrograms) : 0;
    // Pausing can leave usage lower than before this turn: held heads may fit now.
    return this.pauseOn(worker) || evicted > 0;
  }

  /** T6: over the pause threshold, pause the worker's smallest acting programs down to the target. */
  pauseOn(worker: WorkerKey): boolean {
    const label = workerLabel(worker);
    const capacity = this.handle.workers().find((w) => workerLabel(w.worker) === label)?.capacityTokens;
    if (capacity === undefined) return false;
    return this.ledger.pauseOver(label, this.options.pauseThreshold * capacity, this.options.pauseTarget * capacity) > 0;
  }

  /**
   * T4: a paused program resumes under the resume ceiling, a new one (or one
   * whose worker left) starts within full capacity. Its own worker is
   * preferred (its context may still be cached there), else the most headroom.
   */
  private fit(program: Program | undefined, promptTokens: number, candidates: readonly Room[], home: Room | undefined): WorkerKey | undefined {
    const need = Math.max(program?.tokens ?? 0, promptTokens) + this.options.bufferPerProgram;
    const ceiling = program?.paused ? this.options.pauseThreshold - this.options.resumeHysteresis : 1;
    const headroom = (r: Room) => ceiling * r.capacity - r.used - need;
    if (home && headroom(home) >= 0) return home.key;
    let best: Room | undefined;
    for (const r of candidates) if (headroom(r) >= 0 && (!best || headroom(r) > headroom(best))) best = r;
    return best?.key;
  }

  /** T7: a pinned turn is checked on its pinned worker only; otherwise on its allowed workers. */
  private candidates(head: QueuedHead<R>, rooms: Map<string, Room>): Room[] {
    const pin = head.request.pin;
    const allowed = head.allowedWorkers;
    if (pin) {
      const label = workerLabel(pin);
      const room = rooms.get(label);
      return room && (!allowed || allowed.some((k) => workerLabel(k) === label)) ? [room] : [];
    }
    if (!allowed) return [...rooms.values()];
    const out: Room[] = [];
    for (const k of allowed) {
      const room = rooms.get(workerLabel(k));
      if (room) out.push(room);
    }
    return out;
  }

  private rooms(now: number): Map<string, Room> {
    const workers = this.handle.workers();
    const c = this.cached;
    if (c && c.workers === workers && c.version === this.ledger.version && c.now === now) return c.rooms;
    const expired = this.ledger.expiredCharges(now);
    const rooms = new Map<string, Room>();
    for (const w of workers) {
      const label = workerLabel(w.worker);
      rooms.set(label, { key: w.worker, capacity: w.capacityTokens, used: this.ledger.usageOn(label) - (expired.get(label) ?? 0) });
    }
    this.cached = { workers, version: this.ledger.version, now, rooms };
    return rooms;
  }
}

function go(target: Room | WorkerKey | undefined): GateVerdict {
  if (!target) return GO;
  return { go: true, target: 'key' in target ? target.key : target };
}

function mostHeadroom(rooms: readonly Room[]): Room {
  return rooms.reduce((a, b) => (b.capacity - b.used > a.capacity - a.used ? b : a));
}
