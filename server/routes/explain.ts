// POST /router/explain: the routing decision for a completion request body,
// without dispatching or booking it. Per worker: cached-prefix overlap, the
// prefill and decode load the request would add to, its cost, and why a
// filtered worker was left out. The first thing to look at when cache hits
// do not show up.
import type { FastifyInstance } from 'fastify';
import { parseJsonBody, requestFields } from '../request/fields.js';
import { promptIds, type PromptKind } from '../request/prompt.js';
import type { RouterRuntime } from '../runtime.js';
import { resolveModel } from './openai.js';

export function registerExplainRoute(app: FastifyInstance, rt: RouterRuntime): void {
  app.post('/router/explain', async (request) => {
    const body = parseJsonBody(request.body as Buffer);
    const model = resolveModel(rt, body);
    // A body with messages is a chat request; otherwise a completion.
    const kind: PromptKind = body.messages !== undefined ? 'chat' : 'completion';
    const { ids, basis } = await promptIds(model.tokenizer, body, kind, { limit: model.config.tokenizeLimit });
    const x = model.route.explain(requestFields(rt.nextRequestId(), request.headers), ids);
    return {
      model: x.model,
      kind,
      tokenizer: model.tokenizer.spec,
      prompt_basis: basis,
      block_size: model.config.blockSize,
      policy: x.policy,
      prompt_tokens: x.promptTokens,
      prompt_blocks: x.promptBlocks,
      chosen: x.chosen,
      error: x.error,
      workers: x.workers.map((w) => ({
        worker: w.worker,
        eligible: w.eligible,
        filtered: w.filtered,
        overlap_blocks: w.overlapBlocks,
        cached_tokens: w.cachedTokens,
        prefill_tokens: w.prefillTokens,
        decode_blocks: w.decodeBlocks,
        active_requests: w.activeRequests,
        cost: w.cost,
      })),
    };
  });
}
