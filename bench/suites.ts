// Every benchmark suite, in the order the runner measures them.
import type { BenchSuite } from './figures.js';
import { decisionSuite } from './decision.bench.js';
import { diagnosticsSuite } from './diagnostics.bench.js';
import { hashSuite } from './hash.bench.js';
import { indexFleetSuite } from './index-fleet.bench.js';
import { prefixIndexSuite } from './prefix-index.bench.js';
import { replaySuite } from './replay.bench.js';
import { replicasSuite } from './replicas.bench.js';
import { schedulerSuite } from './scheduler.bench.js';
import { selectKernelsSuite } from './select-kernels.bench.js';
import { serverSuite } from './server.bench.js';
import { tokenizeHostileSuite } from './tokenize-hostile.bench.js';
import { tokenizeSuite } from './tokenize.bench.js';

export const suites: BenchSuite[] = [
  hashSuite,
  prefixIndexSuite,
  indexFleetSuite,
  selectKernelsSuite,
  decisionSuite,
  schedulerSuite,
  tokenizeSuite,
  tokenizeHostileSuite,
  serverSuite,
  diagnosticsSuite,
  replaySuite,
  replicasSuite,
];
