// Deficit round robin across policy classes. Each class earns `quantum`
// (uncached tokens) per round and spends each request's cost when it is served.
//
// One arbitration is O(classes) whatever the request sizes: when a full ring
// makes no progress, every dispatchable class is granted the smallest number of
// whole rounds any of them needs, at once ("bulk virtual rounds").

export interface DrrClass {
  readonly quantum: number;
  deficit: number;
}

/** What a class offers right now: the cost of its dispatchable head, or why it has none. */
export type DrrOffer = { cost: number } | 'empty' | 'blocked';

export class DeficitRoundRobin<C extends DrrClass> {
  private cursor = 0;
  /** Per class, the cost offered in the current pick (NaN: nothing dispatchable). Reused across picks. */
  private readonly costs: Float64Array;

  constructor(private readonly classes: readonly C[]) {
    this.costs = new Float64Array(classes.length);
  }

  /** Index of the class the next turn starts from. */
  get position(): number {
    return this.cursor;
  }

  /**
   * The class to serve next, or undefined when none can dispatch. `offer` may
   * reject expired heads before answering; that spends no deficit and does not
   * move the cursor. It is called at most once per class.
   */
  pick(offer: (c: C) => DrrOffer): C | undefined {
    const n = this.classes.length;
    const costs = this.costs.fill(NaN);
    for (let k = 0; k < n; k++) {
      const i = (this.cursor + k) % n;
      const c = this.classes[i]!;
      const o = offer(c);
      if (o === 'empty') {
        c.deficit = 0;
        continue;
      }
      if (o === 'blocked') continue; // keeps its credit, earns none
      costs[i] = o.cost;
      // A quantum is added only when the head is not yet affordable.
      if (c.deficit < o.cost) c.deficit += c.quantum;
      if (c.deficit >= o.cost) {
        this.cursor = i;
        return c;
      }
    }
    let rounds = Infinity;
    for (let i = 0; i < n; i++) {
      const cost = costs[i]!;
      if (Number.isNaN(cost)) continue;
      const c = this.classes[i]!;
      rounds = Math.min(rounds, Math.ceil((cost - c.deficit) / c.quantum));
    }
    if (rounds === Infinity) return undefined;
    for (let i = 0; i < n; i++) {
      if (!Number.isNaN(costs[i]!)) this.classes[i]!.deficit += this.classes[i]!.quantum * rounds;
    }
    for (let k = 0; k < n; k++) {
      const i = (this.cursor + k) % n;
      const cost = costs[i]!;
      if (!Number.isNaN(cost) && this.classes[i]!.deficit >= cost) {
        this.cursor = i;
        return this.classes[i];
      }
    }
    return undefined;
  }

  /**
   * Accounts a served head. The class stays on while its next head is
   * affordable (a weighted burst); an emptied class resets its deficit.
   */
  served(c: C, cost: number, next: DrrOffer): void {
    c.deficit -= cost;
    if (next === 'empty') {
      c.deficit = 0;
      this.advance();
    } else if (next === 'blocked' || c.deficit < next.cost) {
      this.advance();
    }
  }

  private advance(): void {
    this.cursor = (this.cursor + 1) % Math.max(1, this.classes.length);
  }
}
