// The built-in request classifiers, by the `request_classifier.type` names
// router configs use. Parameters are checked strictly: an unknown or retired
// parameter fails start-up with a message naming it.
import type { RequestClassifier, SchedRequest } from '../scheduler/contracts.js';
import { createColdPool } from './cold-pool/index.js';
import { PluginConfigError } from './params.js';
import { createThunderAgent } from './thunderagent/index.js';

export const REQUEST_CLASSIFIERS: Readonly<Record<string, (params?: unknown) => RequestClassifier>> = Object.freeze({
  thunderagent: createThunderAgent,
  cold_pool: createColdPool,
});

/** A fresh classifier (one per model route: each keeps its own fleet's ledger). */
export function createClassifier<R extends SchedRequest = SchedRequest>(type: string, params?: unknown): RequestClassifier<R> {
  const factory = Object.hasOwn(REQUEST_CLASSIFIERS, type) ? REQUEST_CLASSIFIERS[type] : undefined;
  if (!factory) throw new PluginConfigError(`unknown request_classifier type "${type}" (known: ${Object.keys(REQUEST_CLASSIFIERS).join(', ')})`);
  return factory(params) as RequestClassifier<R>;
}
