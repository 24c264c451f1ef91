// GET /metrics in the Prometheus text format.
import type { FastifyInstance } from 'fastify';
import type { RouterRuntime } from '../runtime.js';

export function registerMetricsRoute(app: FastifyInstance, rt: RouterRuntime): void {
  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await rt.metrics.render();
    reply.header('content-type', contentType);
    return body;
  });
}
