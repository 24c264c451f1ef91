// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';
import { tokenizeSuite } from './tokenize.bench.js';

export const suites: BenchSuite[] = [tokenizeSuite];
