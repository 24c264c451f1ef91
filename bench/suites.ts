// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';
import { selectKernelsSuite } from './select-kernels.bench.js';

export const suites: BenchSuite[] = [selectKernelsSuite];
