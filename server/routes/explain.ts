// POST /router/explain: the routing decision for a completion request body,
// without dispatching or booking it. Per worker: cached-prefix overlap, the
// prefill and decode load the request would add to, its cost, and why a
// filtered worker was left out (an ejected worker: the failures that ejected
// it). The first thing to look at when cache hits do not show up. A worker
// whose blocks the index evicted at its memory bound (since the worker was
// last cleared) says so: its overlap may be more than the index still knows.
import type { FastifyInstance } from 'fastify';
import { workerLabel } from '../../bindings/workers.js';
import type { Explanation, ModelFleet } from '../../router/model-fleet.js';
import { requestFields } from '../request/fields.js';
import { promptIds, type PromptKind } from '../request/prompt.js';
import type { RouterRuntime } from '../runtime.js';
import { describeEjection, ejectionBody } from '../workers/ejection-view.js';
import type { WorkerHandle } from '../workers/registry.js';
import { resolveTarget, withBlockKeys } from '../request/target.js';

export function registerExplainRoute(app: FastifyInstance, rt: RouterRuntime): void {
  app.post('/router/explain', async (request) => {
    const body = rt.bodies.parse(request.body as Buffer);
    const target = resolveTarget(rt, body);
    const model = target.model;
    // A body with messages is a chat request; otherwise a completion.
    const kind: PromptKind = body.messages !== undefined ? 'chat' : 'completion';
    const { ids, basis, media } = await promptIds(model.tokenizer, body, kind, { limit: model.config.tokenizeLimit, multimodal: model.config.multimodal });
    const fields = withBlockKeys(requestFields(rt.nextRequestId(), request.headers), target, body);
    if (media) fields.media = media;
    const busy = model.route.busyThresholds();
    const disagg = model.disagg?.explain(fields, ids, busy[fields.policyClass ?? model.config.defaultClass] ?? busy[model.config.defaultClass] ?? null);
    const x = disagg?.main ?? model.route.explain(fields, ids);
    const handles = handlesByLabel(rt, model.name);
    const evicted = evictedByLabel(model.route.fleet);
    const workers = (list: Explanation['workers']) =>
      list.map((w) => {
        const handle = handles.get(w.worker);
        const ejection = handle?.health().ejection ?? null;
        const evictedBlocks = evicted.get(w.worker) ?? 0;
        return {
          worker: w.worker,
          eligible: w.eligible,
          // Draining is the operator's word and comes first; otherwise an ejected worker says why it is out.
          filtered: ejection && !w.eligible && !handle!.draining ? describeEjection(ejection) : w.filtered,
          ejection: ejection && ejectionBody(ejection),
          overlap_blocks: w.overlapBlocks,
          overlap_by_tier: w.overlapByTier,
          credited_blocks: w.creditedBlocks,
          evicted_blocks: evictedBlocks,
          overlap_may_be_underestimated: evictedBlocks > 0,
          cached_tokens: w.cachedTokens,
          prefill_tokens: w.prefillTokens,
          decode_blocks: w.decodeBlocks,
          active_requests: w.activeRequests,
          cost: w.cost,
          predicted_ttft_ms: w.predictedTtftMs,
          speed: w.speed && {
            tokens_per_second: w.speed.tokensPerSecond,
            base_ms: w.speed.baseMs,
            factor: w.speed.factor,
            speed_class: w.speed.speedClass,
            observations: w.speed.observations,
          },
        };
      });
    return {
      model: x.model,
      adapter: target.adapter,
      kind,
      tokenizer: model.tokenizer.spec,
      tokenizer_engine: model.tokenizer.engine,
      prompt_basis: basis,
      block_size: model.config.blockSize,
      policy: x.policy,
      prompt_tokens: x.promptTokens,
      prompt_blocks: x.promptBlocks,
      media_items: media?.length ?? 0,
      tier_weights: model.config.tierWeights,
      chosen: x.chosen,
      error: x.error,
      index_evicted_blocks: model.route.fleet.indexStats().evictedBlocks,
      workers: workers(x.workers),
      // A disaggregated model: the decision, and the decode pick beside the prefill pick (`chosen` above).
      ...(disagg && {
        disaggregation: {
          mode: disagg.decision.mode,
          reason: disagg.decision.reason,
          engine: model.config.engine,
          threshold_tokens: disagg.decision.threshold,
          uncached_tokens: disagg.decision.uncachedTokens,
          aggregate_cached_tokens: disagg.decision.aggregateCachedTokens,
          prefill: disagg.decision.mode === 'disaggregated' ? x.chosen : null,
          decode: disagg.decode && { chosen: disagg.decode.chosen, error: disagg.decode.error, workers: workers(disagg.decode.workers) },
        },
      }),
    };
  });
}

/** The model's workers by the label explain names them with (`id`, or `id#rank` for ranks past 0). */
function handlesByLabel(rt: RouterRuntime, model: string): Map<string, WorkerHandle> {
  const out = new Map<string, WorkerHandle>();
  for (const h of rt.registry.list()) {
    if (h.model.name !== model) continue;
    for (let rank = 0; rank < h.config.dataParallelSize; rank++) out.set(workerLabel({ id: h.id, rank }), h);
  }
  return out;
}

/** Per worker label, the ids the index evicted since the worker was last cleared (workers with none left out). */
function evictedByLabel(fleet: ModelFleet): Map<string, number> {
  const out = new Map<string, number>();
  for (const [, key] of fleet.workers.entries()) {
    const n = fleet.index.evictedBlocks(key);
    if (n > 0) out.set(workerLabel(key), n);
  }
  return out;
}
