// POST /router/explain: the routing decision for a completion request body,
// without dispatching or booking it. Per worker: cached-prefix overlap, the
// prefill and decode load the request would add to, its cost, and why a
// filtered worker was left out (an ejected worker: the failures that ejected
// it). The first thing to look at when cache hits do not show up.
import type { FastifyInstance } from 'fastify';
import { workerLabel } from '../../bindings/workers.js';
import { requestFields } from '../request/fields.js';
import { promptTokens, type PromptKind } from '../request/prompt.js';
import type { RouterRuntime } from '../runtime.js';
import { describeEjection, ejectionBody } from '../workers/ejection-view.js';
import type { WorkerHandle } from '../workers/registry.js';
import { resolveModel } from './openai.js';

export function registerExplainRoute(app: FastifyInstance, rt: RouterRuntime): void {
  app.post('/router/explain', async (request) => {
    const body = rt.bodies.parse(request.body as Buffer);
    const model = resolveModel(rt, body);
    // A body with messages is a chat request; otherwise a completion.
    const kind: PromptKind = body.messages !== undefined ? 'chat' : 'completion';
    const tokens = promptTokens(model.tokenizer, body, kind);
    const x = model.route.explain(requestFields(rt.nextRequestId(), request.headers), tokens);
    const handles = handlesByLabel(rt, model.name);
    return {
      model: x.model,
      kind,
      tokenizer: model.tokenizer.spec,
      block_size: model.config.blockSize,
      policy: x.policy,
      prompt_tokens: x.promptTokens,
      prompt_blocks: x.promptBlocks,
      chosen: x.chosen,
      error: x.error,
      workers: x.workers.map((w) => {
        const handle = handles.get(w.worker);
        const ejection = handle?.health().ejection ?? null;
        return {
          worker: w.worker,
          eligible: w.eligible,
          // Draining is the operator's word and comes first; otherwise an ejected worker says why it is out.
          filtered: ejection && !w.eligible && !handle!.draining ? describeEjection(ejection) : w.filtered,
          ejection: ejection && ejectionBody(ejection),
          overlap_blocks: w.overlapBlocks,
          cached_tokens: w.cachedTokens,
          prefill_tokens: w.prefillTokens,
          decode_blocks: w.decodeBlocks,
          active_requests: w.activeRequests,
          cost: w.cost,
        };
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
