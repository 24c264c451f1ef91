// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';
import { hashSuite } from './hash.bench.js';
import { prefixIndexSuite } from './prefix-index.bench.js';
import { selectKernelsSuite } from './select-kernels.bench.js';
import { serverSuite } from './server.bench.js';
import { tokenizeSuite } from './tokenize.bench.js';

export const suites: BenchSuite[] = [hashSuite, prefixIndexSuite, selectKernelsSuite, tokenizeSuite, serverSuite];
