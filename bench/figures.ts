// What a benchmark suite reports: named figures, each with its unit and, where
// an issue set one, the goal it is read against.

export interface Figure {
  /** The key in `npm run bench -- --json`. */
  key: string;
  value: number;
  unit: string;
  /** The goal as text, e.g. "<= 0.15"; compared by the runner for the table. */
  goal?: string;
  note?: string;
}

export interface BenchOptions {
  /** Keep the whole run short (smaller fixtures, fewer samples). */
  quick: boolean;
}

export interface BenchSuite {
  name: string;
  run(options: BenchOptions): Promise<Figure[]>;
}

/** Whether value meets a goal written as "<= x" or ">= x". */
export function meetsGoal(value: number, goal: string): boolean | undefined {
  const m = /^\s*(<=|>=)\s*([0-9.eE+-]+)\s*$/.exec(goal);
  if (!m) return undefined;
  const bound = Number(m[2]);
  return m[1] === '<=' ? value <= bound : value >= bound;
}
