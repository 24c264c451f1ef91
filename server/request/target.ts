// What a request's body says about how its blocks are named and where they
// may go, beyond the prompt: the `model` it names (a model, or one of a
// model's LoRA adapters) and its `cache_salt`. An adapter request is routed
// in its base model's model fleet, hashed under the adapter and kept to the
// workers that serve it; a salted request's blocks match only blocks cached
// under the same salt (router/model-fleet/block-keys.ts).
import { RouterError } from '../../router/errors.js';
import type { RequestFields } from '../../router/model-fleet.js';
import type { RouterRuntime } from '../runtime.js';
import { adapterConstraints } from '../workers/adapters.js';
import type { ModelRuntime } from '../workers/model-runtime.js';
import { modelOf } from './fields.js';

export interface RequestTarget {
  model: ModelRuntime;
  /** The LoRA adapter the request's `model` names; null for the base model. */
  adapter: string | null;
}

/**
 * The model (and adapter) a request names: a model's name, an adapter's
 * (vLLM's way), or "model:adapter" (SGLang's); unknown names are a 404.
 */
export function resolveTarget(rt: Pick<RouterRuntime, 'models' | 'adapters'>, body: Record<string, unknown>): RequestTarget {
  const name = modelOf(body);
  const model = rt.models.get(name);
  if (model) return { model, adapter: null };
  const base = rt.adapters.get(name);
  if (base) return { model: base, adapter: name };
  const colon = name.lastIndexOf(':');
  const prefixed = colon > 0 ? rt.models.get(name.slice(0, colon)) : undefined;
  const adapter = name.slice(colon + 1);
  if (prefixed && rt.adapters.get(adapter) === prefixed) return { model: prefixed, adapter };
  const served = [...rt.models.keys(), ...rt.adapters.keys()].join(', ');
  throw new RouterError('KVR_ERR_MODEL_NOT_FOUND', `the model "${name}" is not served here (served: ${served})`, { param: 'model' });
}

/** `cache_salt`: a non-empty string when present (vLLM refuses anything else); null when absent. */
export function cacheSaltOf(body: Record<string, unknown>): string | null {
  const salt = body.cache_salt;
  if (salt === undefined || salt === null) return null;
  if (typeof salt !== 'string' || salt === '') {
    throw new RouterError('KVR_ERR_INVALID_REQUEST', 'cache_salt: must be a non-empty string', { param: 'cache_salt' });
  }
  return salt;
}

/** The request's fields with its adapter and salt: the hash keys, and the adapter's worker constraints. */
export function withBlockKeys(fields: RequestFields, target: RequestTarget, body: Record<string, unknown>): RequestFields {
  const salt = cacheSaltOf(body);
  if (target.adapter === null) return salt === null ? fields : { ...fields, cacheSalt: salt };
  const { required, preferred } = adapterConstraints(target.adapter);
  return {
    ...fields,
    loraName: target.adapter,
    cacheSalt: salt,
    requiredTaints: [...(fields.requiredTaints ?? []), required],
    preferredTaints: [...(fields.preferredTaints ?? []), preferred],
  };
}
