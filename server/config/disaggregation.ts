// The config of prefill/decode disaggregation: a model's engine kind and
// disaggregation settings, each worker's role (and SGLang's bootstrap port),
// and the checks across them that a file or the admin API must pass.
import type { DisaggSettings } from '../../router/disagg/decider.js';
import { canDecode, canPrefill, ENGINE_KINDS, WORKER_ROLES, type EngineKind, type WorkerRole } from '../../router/disagg/roles.js';
import { ConfigError, join, type Fields } from './fields.js';

export type DisaggregationConfig = Omit<DisaggSettings, 'engine'>;

export interface WorkerRoleConfig {
  role: WorkerRole;
  /** The engine the worker was declared with (null: its model's). */
  engine: EngineKind | null;
  /** SGLang: the prefill server's bootstrap port (its --disaggregation-bootstrap-port); null when not set. */
  bootstrapPort: number | null;
}

export const DISAGG_DEFAULTS = {
  engine: 'vllm' as EngineKind,
  minRemotePrefillTokens: 512,
  /** SGLang's own default of --disaggregation-bootstrap-port. */
  sglangBootstrapPort: 8998,
};

export function readEngine(f: Fields, inherited: EngineKind): EngineKind {
  return f.has('engine') ? f.oneOf('engine', ENGINE_KINDS) : inherited;
}

/** `disaggregation: false` turns it off (for one model when the top level turns it on). */
export function readDisaggregation(f: Fields, engine: EngineKind, inherited: DisaggregationConfig | null): DisaggregationConfig | null {
  if (!f.has('disaggregation')) return inherited;
  if (f.get('disaggregation') === false) return null;
  return f.object('disaggregation', (d) => ({
    minRemotePrefillTokens: d.number('min_remote_prefill_tokens', inherited?.minRemotePrefillTokens ?? DISAGG_DEFAULTS.minRemotePrefillTokens, { integer: true, min: 0 }),
    // vLLM's NIXL connector pulls only the blocks the decode worker lacks; SGLang's decode side receives the whole prompt.
    decodePrefixReuse: d.boolean('decode_prefix_reuse', inherited?.decodePrefixReuse ?? engine === 'vllm'),
  }));
}

export function readWorkerRole(f: Fields): WorkerRoleConfig {
  const role = f.oneOf('role', WORKER_ROLES, 'both');
  const engine = f.has('engine') ? f.oneOf('engine', ENGINE_KINDS) : null;
  const bootstrapPort = f.optionalNumber('bootstrap_port', { integer: true, min: 1, max: 65535 });
  return { role, engine, bootstrapPort };
}

interface ModelSide {
  name: string;
  engine: EngineKind;
  disaggregation: DisaggregationConfig | null;
}

/** A worker's role against its model's settings (the admin API's add-worker call checks this too). */
export function checkWorkerRole(worker: WorkerRoleConfig & { model: string }, model: ModelSide, path: string): void {
  if (worker.engine !== null && worker.engine !== model.engine) {
    throw new ConfigError(join(path, 'engine'), `is ${worker.engine} but model "${model.name}" is served by ${model.engine}: prefill and decode workers of one model must speak one handoff protocol`);
  }
  if (worker.role !== 'both' && !model.disaggregation) {
    throw new ConfigError(join(path, 'role'), `is ${worker.role} but model "${model.name}" sets no disaggregation: add disaggregation settings to the model, or make the worker role both`);
  }
  if (worker.bootstrapPort !== null && (model.engine !== 'sglang' || !canPrefill(worker.role))) {
    throw new ConfigError(join(path, 'bootstrap_port'), `is the bootstrap port of an SGLang prefill server; this worker is a ${model.engine} ${worker.role} worker`);
  }
}

/** A disaggregated model declared with workers needs someone to prefill and someone else to decode. */
export function checkFleetRoles(models: readonly ModelSide[], workers: readonly (WorkerRoleConfig & { model: string; id: string })[], declared: number): void {
  for (const [i, model] of models.entries()) {
    if (!model.disaggregation) continue;
    const own = workers.filter((w) => w.model === model.name);
    if (own.length === 0) continue; // workers come later, through the admin API
    const prefill = own.filter((w) => canPrefill(w.role));
    const decode = own.filter((w) => canDecode(w.role));
    // Models no models entry declares take the top-level settings.
    const where = i < declared ? `models[${i}].disaggregation` : 'disaggregation';
    if (prefill.length === 0) throw new ConfigError(where, `model "${model.name}" disaggregates but none of its workers (${own.map((w) => w.id).join(', ')}) has role prefill or both`);
    if (decode.length === 0) throw new ConfigError(where, `model "${model.name}" disaggregates but none of its workers (${own.map((w) => w.id).join(', ')}) has role decode or both`);
    if (own.length < 2) throw new ConfigError(where, `model "${model.name}" disaggregates but has one worker (${own[0]!.id}): a handoff needs a prefill and a decode worker`);
  }
}
