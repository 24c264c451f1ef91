// The request-classifier catalogue: config names a classifier by `type` and
// hands it `params`; a factory builds it (and rejects unknown parameters by
// name, e.g. with router/plugins/params.ts readParams). Program-aware
// classifiers register here under their type.
import type { RoutedRequest } from '../../router/partition.js';
import { PluginConfigError } from '../../router/plugins/params.js';
import type { RequestClassifier } from '../../router/scheduler/contracts.js';

export type ClassifierFactory = (params: Record<string, unknown>) => RequestClassifier<RoutedRequest>;

const factories = new Map<string, ClassifierFactory>();

/** Adds a classifier type; a type is registered once. */
export function registerClassifier(type: string, factory: ClassifierFactory): void {
  if (factories.has(type)) throw new Error(`request classifier "${type}" is already registered`);
  factories.set(type, factory);
}

export function classifierTypes(): string[] {
  return [...factories.keys()].sort();
}

/** Builds a classifier from its config; unknown types and bad parameters throw PluginConfigError. */
export function createClassifier(type: string, params: Record<string, unknown>): RequestClassifier<RoutedRequest> {
  const factory = factories.get(type);
  if (!factory) {
    const known = classifierTypes();
    throw new PluginConfigError(`unknown request classifier "${type}" (known: ${known.length > 0 ? known.join(', ') : 'none registered'})`);
  }
  return factory(params);
}
