// The Fastify app over a RouterRuntime: every route, the raw-body parser
// (request bodies are forwarded to workers byte for byte, so they are kept
// as received and parsed by the routes), and OpenAI-style errors for
// everything Fastify itself refuses.
import Fastify, { LogController, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { RouterError } from '../router/errors.js';
import { asRouterError } from './http/respond.js';
import { registerAdminRoutes } from './routes/admin.js';
import { registerExplainRoute } from './routes/explain.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerKvIngestRoute } from './routes/kv-ingest.js';
import { registerMetricsRoute } from './routes/metrics.js';
import { registerOpenAiRoutes } from './routes/openai.js';
import type { RouterRuntime } from './runtime.js';

/** Fastify's own refusals (body limits, broken uploads) in the router's error catalogue. */
function fromFastify(error: FastifyError): RouterError {
  if (RouterError.is(error)) return error;
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new RouterError('KVR_ERR_BODY_TOO_LARGE', error.message);
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new RouterError('KVR_ERR_INVALID_REQUEST', error.message, {}, error.statusCode);
  }
  return asRouterError(error);
}

export function buildApp(rt: RouterRuntime, logger: Logger): FastifyInstance {
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: !rt.config.requestLog }),
    bodyLimit: rt.config.limits.maxBodyBytes,
    // Requests on kept-alive connections during shutdown get the router's own 503.
    return503OnClosing: false,
    keepAliveTimeout: 72_000,
  }) as unknown as FastifyInstance;

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.setErrorHandler((thrown: FastifyError, request, reply) => {
    const error = fromFastify(thrown);
    if (error.status >= 500) request.log.error(thrown);
    if (error.status === 413) rt.metrics.rejected('', error.code);
    reply.code(error.status).header('content-type', 'application/json').send(error.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    const error = new RouterError('KVR_ERR_ROUTE_NOT_FOUND', `no route for ${request.method} ${request.url.split('?')[0]}`);
    reply.code(error.status).send(error.toBody());
  });

  registerOpenAiRoutes(app, rt);
  registerExplainRoute(app, rt);
  registerHealthRoutes(app, rt);
  registerMetricsRoute(app, rt);
  registerKvIngestRoute(app, rt);
  if (rt.config.adminToken !== null) registerAdminRoutes(app, rt, rt.config.adminToken);
  return app;
}
