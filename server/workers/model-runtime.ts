// One served model: its routing (ModelRouter on the real clock, with the
// configured selection policy, policy classes and classifier) and its
// tokenizer. Built once per model at start-up.
import { readFile } from 'node:fs/promises';
import { RealClock } from '../../router/clock.js';
import { ModelRouter } from '../../router/model-router.js';
import { DisaggPlanner } from '../../router/disagg/planner.js';
import { createSelectionPolicy } from '../../router/selection/policies/index.js';
import { createTokenizer, type PromptTokenizer } from '../../router/tokenize/index.js';
import { createClassifier } from '../../router/plugins/classifiers.js';
import { ConfigError } from '../config/fields.js';
import type { ModelConfig } from '../config/schema.js';

export class ModelRuntime {
  readonly name: string;
  readonly route: ModelRouter;
  /** The prefill/decode planner of a disaggregated model; null when requests run whole. */
  readonly disagg: DisaggPlanner | null;

  constructor(
    readonly config: ModelConfig,
    readonly tokenizer: PromptTokenizer,
  ) {
    this.name = config.name;
    this.route = new ModelRouter({
      model: config.name,
      blockSize: config.blockSize,
      clock: new RealClock(),
      policy: createSelectionPolicy(config.selection.type, config.selection.params),
      classes: config.policyClasses,
      defaultClass: config.defaultClass,
      classifier: config.requestClassifier ? createClassifier(config.requestClassifier.type, config.requestClassifier.params) : undefined,
      routedTtlMs: config.approximate.ttlMs,
      maxRoutedBlocks: config.approximate.maxBlocks,
      indexMemoryBytes: config.indexMemoryBytes,
      tierWeights: config.tierWeights,
      sessionAffinity: config.sessionAffinity,
      // Fresh random tie-breaks per process, as replicas must not all pick alike.
      seed: (Math.random() * 0x7fffffff) | 0,
    });
    this.disagg = config.disaggregation && new DisaggPlanner(this.route, { engine: config.engine, ...config.disaggregation });
  }

  close(): void {
    this.disagg?.close();
    this.route.close();
  }
}

/** Tokenizers by spec: models that share a spec share one tokenizer and its caches. */
export type TokenizerCache = Map<string, Promise<PromptTokenizer>>;

/** Loads the model's tokenizer (an hf: directory is read from disk) and builds its route. */
export async function createModelRuntime(config: ModelConfig, tokenizers: TokenizerCache = new Map()): Promise<ModelRuntime> {
  let pending = tokenizers.get(config.tokenizer);
  if (!pending) {
    pending = createTokenizer(config.tokenizer, { readFile: (file) => readFile(file, 'utf8') });
    tokenizers.set(config.tokenizer, pending);
  }
  let tokenizer: PromptTokenizer;
  try {
    tokenizer = await pending;
  } catch (error) {
    throw new ConfigError(`tokenizer of model "${config.name}"`, `cannot load ${config.tokenizer}: ${(error as Error).message}`);
  }
  return new ModelRuntime(config, tokenizer);
}
