// The OpenAI-compatible endpoints. A generation request is parsed, tokenized
// and handed to an Exchange, which owns the raw response from then on (the
// Fastify reply is hijacked: the worker's bytes are relayed as they come).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RouterError } from '../../router/errors.js';
import { asRouterError, sendError } from '../http/respond.js';
import { modelOf, requestFields, streamOf } from '../request/fields.js';
import { promptIds, type PromptKind } from '../request/prompt.js';
import type { RouterRuntime } from '../runtime.js';
import { Exchange } from '../upstream/exchange.js';
import type { ModelRuntime } from '../workers/model-runtime.js';

/** The model a request names; unknown models are a 404. */
export function resolveModel(rt: RouterRuntime, body: Record<string, unknown>): ModelRuntime {
  const name = modelOf(body);
  const model = rt.models.get(name);
  if (!model) {
    throw new RouterError('KVR_ERR_MODEL_NOT_FOUND', `the model "${name}" is not served here (served: ${[...rt.models.keys()].join(', ')})`, { param: 'model' });
  }
  return model;
}

export function registerOpenAiRoutes(app: FastifyInstance, rt: RouterRuntime): void {
  const generate = (kind: PromptKind) => async (request: FastifyRequest, reply: FastifyReply) => {
    const arrivedAt = performance.now();
    reply.hijack();
    let model: ModelRuntime | undefined;
    try {
      if (rt.shuttingDown) throw new RouterError('KVR_ERR_SHUTTING_DOWN');
      const raw = request.body as Buffer;
      const body = rt.bodies.parse(raw);
      model = resolveModel(rt, body);
      streamOf(body);
      const fields = requestFields(rt.nextRequestId(), request.headers);
      const { ids: tokens } = await promptIds(model.tokenizer, body, kind, { limit: model.config.tokenizeLimit });
      // A long prompt is tokenized on another thread; the client may have left meanwhile.
      if (reply.raw.destroyed) throw new RouterError('KVR_ERR_ABORTED');
      new Exchange(rt, model, request.raw, reply.raw, request.url, raw, arrivedAt, fields.id).start(fields, tokens);
    } catch (thrown) {
      const error = asRouterError(thrown);
      if (error.code === 'KVR_ERR_INTERNAL') request.log.error(thrown);
      // Unknown model names are client input: they are not used as metric labels.
      const label = model?.name ?? '';
      rt.metrics.rejected(label, error.code);
      rt.metrics.ended(label, '', error.status, 'rejected');
      sendError(reply.raw, error);
    }
  };
  app.post('/v1/chat/completions', generate('chat'));
  app.post('/v1/completions', generate('completion'));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: [...rt.models.keys()].map((id) => ({ id, object: 'model', created: 0, owned_by: 'kvrouter' })),
  }));
}
