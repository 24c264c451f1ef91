// The Fastify app over a RouterRuntime: every route, the raw-body parser
// (request bodies are forwarded to workers byte for byte, so they are kept
// as received and parsed by the routes), and OpenAI-style errors for
// everything Fastify and Node's HTTP parser refuse.
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { RouterError } from '../router/errors.js';
import { registerDashboardRoutes } from './dashboard/route.js';
import { registerDiagnoseRoute } from './diagnostics/route.js';
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

/** What Node's HTTP parser refused (headers over the size limit, bytes no HTTP request has, a request that took too long). */
function fromParser(error: NodeJS.ErrnoException): RouterError {
  if (error.code === 'HPE_HEADER_OVERFLOW') return new RouterError('KVR_ERR_HEADERS_TOO_LARGE', `the request headers are over ${maxHeaderSize} bytes`);
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return new RouterError('KVR_ERR_REQUEST_TIMEOUT');
  const reason = (error as { reason?: unknown }).reason;
  return new RouterError('KVR_ERR_INVALID_REQUEST', `malformed HTTP request${error.code ? ` (${error.code})` : ''}: ${typeof reason === 'string' ? reason : error.message}`);
}

/** Answers a request the parser refused on the raw socket, then closes it (nothing more can be read from it). */
function answerClientError(rt: RouterRuntime, logger: Logger, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const routerError = fromParser(error);
  logger.debug({ err: error }, 'client error');
  rt.metrics.rejected('', routerError.code);
  // A response already under way on this connection must not get a second status line inside it.
  const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const text = JSON.stringify(routerError.toBody());
    const status = routerError.status;
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
  }
  // Ends after the answer is flushed; destroying at once could drop it.
  socket.destroySoon();
}

export function buildApp(rt: RouterRuntime, logger: Logger): FastifyInstance {
  const app = Fastify({
    loggerInstance: logger,
    logController: new LogController({ disableRequestLogging: !rt.config.requestLog }),
    // Without request logging, a request's log is the app's own: no child logger per request.
    ...(!rt.config.requestLog && { childLoggerFactory: (parent: FastifyBaseLogger) => parent }),
    bodyLimit: rt.config.limits.maxBodyBytes,
    // Requests on kept-alive connections during shutdown get the router's own 503.
    return503OnClosing: false,
    keepAliveTimeout: 72_000,
    clientErrorHandler: (error, socket) => answerClientError(rt, logger, error, socket),
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
  if (rt.diagnostics) {
    registerDiagnoseRoute(app, rt, rt.diagnostics);
    registerDashboardRoutes(app, rt, rt.diagnostics);
  }
  if (rt.config.adminToken !== null) registerAdminRoutes(app, rt, rt.config.adminToken);
  return app;
}
