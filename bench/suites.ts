// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';

export const suites: BenchSuite[] = [];
