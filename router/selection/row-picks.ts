// Shared pieces for pickers: uniform choice among the best rows by a key.

/** The row with the smallest key among rows where ok(i), ties uniformly at random (reservoir); -1 when none. */
export function argminRandomTies(count: number, key: (i: number) => number, random: () => number, ok: (i: number) => boolean = () => true): number {
  let best = -1;
  let bestKey = Infinity;
  let ties = 0;
  for (let i = 0; i < count; i++) {
    if (!ok(i)) continue;
    const k = key(i);
    if (best < 0 || k < bestKey) {
      best = i;
      bestKey = k;
      ties = 1;
    } else if (k === bestKey && random() * ++ties < 1) {
      best = i;
    }
  }
  return best;
}
