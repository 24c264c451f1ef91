// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';
import { prefixIndexSuite } from './prefix-index.bench.js';

export const suites: BenchSuite[] = [prefixIndexSuite];
