// GET /router/diagnose: every worker rank's verdict (ok, silent, stale,
// mismatch), worst first, each cause with what was seen and the fix, the
// rank's KV-event and stream counters, and the model-wide hit rates. Behind
// the admin token when one is configured (it names workers and endpoints).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerCheck } from '../http/auth.js';
import type { RouterRuntime } from '../runtime.js';
import type { Diagnostics } from './diagnostics.js';
import { ratesOf } from './hit-rates.js';

/** The onRequest hook that asks for the admin token, when one is configured. */
export function adminGuard(rt: RouterRuntime): ((request: FastifyRequest) => Promise<void>) | null {
  if (rt.config.adminToken === null) return null;
  const check = bearerCheck(rt.config.adminToken);
  return async (request) => check(request.headers.authorization);
}

export function diagnosisBody(rt: RouterRuntime, diagnostics: Diagnostics) {
  const report = diagnostics.report();
  return {
    ...report,
    models: [...rt.models.values()].map((m) => {
      const hits = diagnostics.hits.ofModel(m.name);
      return { model: m.name, block_size: m.config.blockSize, tokenizer: m.config.tokenizer, hit_rate: { predicted: ratesOf(hits.predicted), reported: ratesOf(hits.reported) } };
    }),
  };
}

export function registerDiagnoseRoute(app: FastifyInstance, rt: RouterRuntime, diagnostics: Diagnostics): void {
  const guard = adminGuard(rt);
  app.get('/router/diagnose', { onRequest: guard ? [guard] : [] }, async () => diagnosisBody(rt, diagnostics));
}
