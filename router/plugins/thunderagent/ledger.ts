// ThunderAgent's program ledger: one program per agent session, the turns
// registered for it, and the tokens each worker is charged for the programs
// whose context it holds. Reads (room, expiry) never change it; the classifier
// and the gate's commit change it.
import { workerLabel, type WorkerKey } from '../../../bindings/workers.js';

export interface Program {
  readonly session: string;
  /** The worker holding its context: where its latest turn ran. */
  worker: WorkerKey | null;
  /**
   * Context tokens: the largest prompt of its turns. An agent's prompt carries
   * its whole history (earlier outputs included), so this is its KV footprint
   * without the output of the turn now running, which the buffer covers.
   */
  tokens: number;
  /** Paused programs hold no charge; their next turn needs room under the resume ceiling. */
  paused: boolean;
  /** Label of the worker its charge sits on; null while uncharged (paused, or never placed). */
  chargedOn: string | null;
  /** Tokens charged on chargedOn: tokens + the per-program buffer. */
  charge: number;
  /** Its dispatched turns not yet ended. */
  readonly inflight: Set<string>;
  /** When its last turn ended (or when it was created). */
  idleSince: number;
}

interface Turn {
  readonly session: string;
  readonly registeredAt: number;
  dispatched: boolean;
  final: boolean;
}

/** A program as tests and reports see it. */
export interface ProgramView {
  session: string;
  worker: string | null;
  tokens: number;
  paused: boolean;
  /** A turn is in flight (reasoning) rather than waiting on a tool (acting). */
  reasoning: boolean;
  charge: number;
  idleSince: number;
}

export class ProgramLedger {
  private readonly programs = new Map<string, Program>();
  /** Programs with no turn in flight, longest idle first (a program is re-inserted when it goes idle). */
  private readonly idle = new Map<string, Program>();
  private readonly turns = new Map<string, Turn>();
  /** Registered, undispatched turns per session: a session waiting to run is not idle. */
  private readonly queued = new Map<string, number>();
  private readonly usage = new Map<string, number>();
  private readonly onWorker = new Map<string, Set<Program>>();
  /** Bumped on every change, so reads derived from the ledger can be cached. */
  version = 0;

  constructor(
    private readonly bufferPerProgram: number,
    private readonly retentionMs: number,
  ) {}

  get size(): number {
    return this.programs.size;
  }

  // ---- reads ----

  /** The session's program, unless it is past retention (then it counts as gone, settled or not). */
  live(session: string, now: number): Program | undefined {
    const p = this.programs.get(session);
    return p && !this.expired(p, now) ? p : undefined;
  }

  registeredAt(requestId: string): number | undefined {
    return this.turns.get(requestId)?.registeredAt;
  }

  usageOn(label: string): number {
    return this.usage.get(label) ?? 0;
  }

  /** Per worker, the charges of programs past retention that are not yet settled. */
  expiredCharges(now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const p of this.idle.values()) {
      if (now < p.idleSince + this.retentionMs) break;
      if (p.chargedOn !== null && !this.queued.has(p.session)) out.set(p.chargedOn, (out.get(p.chargedOn) ?? 0) + p.charge);
    }
    return out;
  }

  /** The next time an idle program passes retention (its charge frees then), or Infinity. */
  nextExpiry(now: number): number {
    for (const p of this.idle.values()) {
      const at = p.idleSince + this.retentionMs;
      if (at > now && !this.queued.has(p.session)) return at;
    }
    return Infinity;
  }

  views(): ProgramView[] {
    return [...this.programs.values()].map((p) => ({
      session: p.session,
      worker: p.worker && workerLabel(p.worker),
      tokens: p.tokens,
      paused: p.paused,
      reasoning: p.inflight.size > 0,
      charge: p.chargedOn === null ? 0 : p.charge,
      idleSince: p.idleSince,
    }));
  }

  /** Charged tokens per worker label. */
  usageByWorker(): Record<string, number> {
    return Object.fromEntries(this.usage);
  }

  // ---- changes ----

  /** A turn was classified: the session is waiting to run from now on. */
  registerTurn(requestId: string, session: string, now: number): void {
    if (this.turns.has(requestId)) return;
    this.turns.set(requestId, { session, registeredAt: now, dispatched: false, final: false });
    this.queued.set(session, (this.queued.get(session) ?? 0) + 1);
    this.version++;
  }

  /**
   * A turn left the queue for `worker`: the program is created or resumed,
   * moves its charge there and grows to the turn's prompt. Returns whether a
   * program was created.
   */
  startTurn(requestId: string, session: string, worker: WorkerKey, promptTokens: number, final: boolean, now: number): boolean {
    let turn = this.turns.get(requestId);
    if (turn?.dispatched) return false;
    if (turn) this.unqueue(turn.session);
    else {
      // Not registered at classify (a classifier swapped in mid-flight): record it now.
      turn = { session, registeredAt: now, dispatched: false, final: false };
      this.turns.set(requestId, turn);
    }
    turn.dispatched = true;
    turn.final = final;
    let p = this.programs.get(session);
    const created = !p;
    if (!p) {
      p = { session, worker: null, tokens: 0, paused: false, chargedOn: null, charge: 0, inflight: new Set(), idleSince: now };
      this.programs.set(session, p);
    }
    p.paused = false;
    p.worker = worker;
    p.tokens = Math.max(p.tokens, promptTokens);
    p.inflight.add(requestId);
    this.idle.delete(session);
    this.chargeOn(p, workerLabel(worker));
    this.version++;
    return created;
  }

  /** The turn went out to another worker than it was admitted to (a retry): its program's charge follows. */
  moveTurn(requestId: string, worker: WorkerKey): boolean {
    const turn = this.turns.get(requestId);
    const p = turn?.dispatched ? this.programs.get(turn.session) : undefined;
    if (!p || !p.inflight.has(requestId)) return false;
    const label = workerLabel(worker);
    if (p.chargedOn === label) return false;
    p.worker = worker;
    this.chargeOn(p, label);
    this.version++;
    return true;
  }

  /**
   * A turn ended (completed, or aborted before or after dispatch). A final turn
   * ends its program; otherwise the program goes idle once no turn is in
   * flight. Returns whether held heads may now see a different answer.
   */
  finishTurn(requestId: string, now: number): boolean {
    const turn = this.turns.get(requestId);
    if (!turn) return false;
    this.turns.delete(requestId);
    this.version++;
    const p = this.programs.get(turn.session);
    if (!turn.dispatched) {
      this.unqueue(turn.session);
      // The session stopped waiting: a program past retention now counts as gone.
      return p !== undefined && this.expired(p, now);
    }
    if (!p || !p.inflight.delete(requestId)) return false;
    if (turn.final) this.remove(p);
    else if (p.inflight.size === 0) {
      p.idleSince = now;
      this.idle.set(p.session, p);
    }
    return true;
  }

  /** Forgets programs past retention. Returns how many. */
  settle(now: number): number {
    let removed = 0;
    for (const p of this.idle.values()) {
      if (now < p.idleSince + this.retentionMs) break;
      if (this.queued.has(p.session)) continue;
      this.remove(p);
      removed++;
    }
    return removed;
  }

  /** Evicts the longest-idle programs while more than `limit` are tracked. Returns how many. */
  evictOver(limit: number): number {
    let evicted = 0;
    while (this.programs.size > limit) {
      let victim: Program | undefined;
      for (const p of this.idle.values()) {
        if (!this.queued.has(p.session)) {
          victim = p;
          break;
        }
      }
      // Every program is running or about to: none can be evicted safely.
      if (!victim) break;
      this.remove(victim);
      evicted++;
    }
    return evicted;
  }

  /**
   * Over `pauseAt` tokens on the worker, pauses its smallest acting programs
   * (idle, no turn waiting) until usage is at `target` tokens. Returns how many.
   */
  pauseOver(label: string, pauseAt: number, target: number): number {
    let used = this.usageOn(label);
    if (used <= pauseAt) return 0;
    const acting = [...(this.onWorker.get(label) ?? [])].filter((p) => p.inflight.size === 0 && !this.queued.has(p.session));
    acting.sort((a, b) => a.tokens - b.tokens || a.idleSince - b.idleSince);
    let paused = 0;
    for (const p of acting) {
      if (used <= target) break;
      used -= p.charge;
      this.uncharge(p);
      p.paused = true;
      paused++;
    }
    if (paused > 0) this.version++;
    return paused;
  }

  // ---- internals ----

  private expired(p: Program, now: number): boolean {
    return p.inflight.size === 0 && now >= p.idleSince + this.retentionMs && !this.queued.has(p.session);
  }

  private unqueue(session: string): void {
    const n = (this.queued.get(session) ?? 0) - 1;
    if (n > 0) this.queued.set(session, n);
    else this.queued.delete(session);
  }

  private chargeOn(p: Program, label: string): void {
    this.uncharge(p);
    p.charge = p.tokens + this.bufferPerProgram;
    p.chargedOn = label;
    this.usage.set(label, this.usageOn(label) + p.charge);
    let set = this.onWorker.get(label);
    if (!set) this.onWorker.set(label, (set = new Set()));
    set.add(p);
  }

  private uncharge(p: Program): void {
    const label = p.chargedOn;
    if (label === null) return;
    const left = this.usageOn(label) - p.charge;
    if (left > 0) this.usage.set(label, left);
    else this.usage.delete(label);
    const set = this.onWorker.get(label)!;
    set.delete(p);
    if (set.size === 0) this.onWorker.delete(label);
    p.chargedOn = null;
  }

  private remove(p: Program): void {
    this.uncharge(p);
    this.programs.delete(p.session);
    this.idle.delete(p.session);
    this.version++;
  }
}
