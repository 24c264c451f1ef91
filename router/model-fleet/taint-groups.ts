// Taint groups: workers that carry the same set of taints share a group (0 is
// the empty set), and the core keeps one tree per group and fast-path view,
// so required taints allow whole groups and preferred taints weight whole
// groups. A request's taints become a group table (allowed flags and cost
// multipliers per group): O(groups x request taints), never O(workers).
import type { GroupTable } from '../../bindings/decision-contract.js';
import type { PreferredTaint } from './types.js';

export class TaintGroups {
  private readonly ids = new Map<string, number>([['', 0]]);
  private readonly sets: ReadonlySet<string>[] = [new Set()];

  /** Groups so far (ids 0..count-1). */
  get count(): number {
    return this.sets.length;
  }

  /** The group of workers carrying exactly these taints, made on first sight. */
  groupOf(taints: readonly string[] | undefined): number {
    const set = new Set(taints ?? []);
    const key = [...set].sort().join('\n');
    let id = this.ids.get(key);
    if (id === undefined) {
      id = this.sets.length;
      this.ids.set(key, id);
      this.sets.push(set);
    }
    return id;
  }

  /** Whether the workers of a group carry a taint. */
  carries(group: number, taint: string): boolean {
    return this.sets[group]?.has(taint) ?? false;
  }

  /**
   * Per group: whether its workers carry every required taint, and the cost
   * multiplier exp(-tanh(sum of the weights of the preferred taints they
   * carry)); null when the request names no taints.
   */
  tableFor(required: readonly string[], preferred: readonly PreferredTaint[]): GroupTable | null {
    if (required.length === 0 && preferred.length === 0) return null;
    const groups = this.sets.length;
    const allowed = new Uint8Array(groups);
    const multipliers = new Float64Array(groups);
    for (let g = 0; g < groups; g++) {
      const set = this.sets[g]!;
      let carries = 1;
      for (const t of required) if (!set.has(t)) carries = 0;
      allowed[g] = carries;
      let weight = 0;
      for (const p of preferred) if (set.has(p.taint)) weight += p.weight;
      multipliers[g] = weight === 0 ? 1 : Math.exp(-Math.tanh(weight));
    }
    return { allowed, multipliers };
  }
}
