// Worker roles in a disaggregated model. A prefill worker computes prompts and
// hands their KV to a decode worker, which generates the answer; a worker of
// role both does either, and whole requests. Roles reach selection as taints
// the router adds itself (one per capability), so the core's taint groups
// restrict each decision to the workers that can take that part of a request,
// ranks included, without a walk over the fleet.

export type WorkerRole = 'prefill' | 'decode' | 'both';
export const WORKER_ROLES: readonly WorkerRole[] = ['prefill', 'decode', 'both'];

/** The engine protocol a model's workers speak for the handoff. */
export type EngineKind = 'vllm' | 'sglang';
export const ENGINE_KINDS: readonly EngineKind[] = ['vllm', 'sglang'];

/** Carried by workers that run a disaggregated request's prefill. */
export const PREFILL_TAINT = 'kvrouter.io/prefill=true';
/** Carried by workers that take a handed-off request's decode. */
export const DECODE_TAINT = 'kvrouter.io/decode=true';
/** Carried by workers that run a whole request on their own. */
export const AGGREGATE_TAINT = 'kvrouter.io/aggregate=true';

export function canPrefill(role: WorkerRole): boolean {
  return role !== 'decode';
}

export function canDecode(role: WorkerRole): boolean {
  return role !== 'prefill';
}

/**
 * Whether a worker serves a request without a handoff. A vLLM instance with a
 * KV connector still runs ordinary requests, so its decode workers prefill
 * short prompts themselves; an SGLang server started in decode mode waits for
 * a bootstrap room on every request, so only a worker of role both can.
 */
export function canAggregate(role: WorkerRole, engine: EngineKind): boolean {
  if (role === 'both') return true;
  return role === 'decode' && engine === 'vllm';
}

/** The taints a worker of this role carries in a disaggregated model. */
export function roleTaints(role: WorkerRole, engine: EngineKind): string[] {
  const taints: string[] = [];
  if (canPrefill(role)) taints.push(PREFILL_TAINT);
  if (canDecode(role)) taints.push(DECODE_TAINT);
  if (canAggregate(role, engine)) taints.push(AGGREGATE_TAINT);
  return taints;
}
