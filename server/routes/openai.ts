// The OpenAI-compatible endpoints. A generation request is parsed, tokenized
// and handed to an Exchange, which owns the raw response from then on (the
// Fastify reply is hijacked: the worker's bytes are relayed as they come).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RouterError } from '../../router/errors.js';
import { asRouterError, sendError } from '../http/respond.js';
import { requestFields, streamOf } from '../request/fields.js';
import { injectsUuids, withImageUuids } from '../request/image-uuids.js';
import { promptIds, type PromptKind } from '../request/prompt.js';
import { resolveTarget, withBlockKeys } from '../request/target.js';
import type { RouterRuntime } from '../runtime.js';
import { DisaggExchange } from '../upstream/disagg-exchange.js';
import { Exchange } from '../upstream/exchange.js';
import type { ModelRuntime } from '../workers/model-runtime.js';

export function registerOpenAiRoutes(app: FastifyInstance, rt: RouterRuntime): void {
  const generate = (kind: PromptKind) => async (request: FastifyRequest, reply: FastifyReply) => {
    const arrivedAt = performance.now();
    reply.hijack();
    let model: ModelRuntime | undefined;
    let tokens: Uint32Array | undefined;
    try {
      if (rt.shuttingDown) throw new RouterError('KVR_ERR_SHUTTING_DOWN');
      const raw = request.body as Buffer;
      const body = rt.bodies.parse(raw);
      const target = resolveTarget(rt, body);
      model = target.model;
      streamOf(body);
      const fields = withBlockKeys(requestFields(rt.nextRequestId(), request.headers), target, body);
      const prompt = await promptIds(model.tokenizer, body, kind, { limit: model.config.tokenizeLimit, multimodal: model.config.multimodal });
      tokens = prompt.ids;
      const media = prompt.media;
      if (media) fields.media = media;
      // A long prompt is tokenized on another thread; the client may have left meanwhile.
      if (reply.raw.destroyed) throw new RouterError('KVR_ERR_ABORTED');
      const sent = (media && injectsUuids(model.config.multimodal, model.config.engine) && withImageUuids(raw, body, media.map((span) => span.id))) || { raw, body };
      const exchange = model.disagg
        ? new DisaggExchange(rt, model, request.raw, reply.raw, request.url, sent.raw, sent.body, arrivedAt, fields.id)
        : new Exchange(rt, model, request.raw, reply.raw, request.url, sent.raw, arrivedAt, fields.id);
      exchange.start(fields, tokens);
    } catch (thrown) {
      const error = asRouterError(thrown);
      if (error.code === 'KVR_ERR_INTERNAL') request.log.error(thrown);
      // Unknown model names are client input: they are not used as metric labels.
      const label = model?.name ?? '';
      rt.metrics.rejected(label, error.code);
      rt.metrics.ended(label, '', error.status, 'rejected');
      sendError(reply.raw, error);
    } finally {
      // The prompt was hashed when the exchange started (or never will be): its ids' memory can take the conversation's next turn.
      if (tokens) model!.tokenizer.release(tokens);
    }
  };
  app.post('/v1/chat/completions', generate('chat'));
  app.post('/v1/completions', generate('completion'));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: [
      ...[...rt.models.keys()].map((id) => ({ id, object: 'model', created: 0, owned_by: 'kvrouter' })),
      // Adapters are listed as vLLM lists them: under their own names, with their base model as parent.
      ...[...rt.adapters].map(([id, base]) => ({ id, object: 'model', created: 0, owned_by: 'kvrouter', parent: base.name })),
    ],
  }));
}
