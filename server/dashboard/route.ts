// GET /dashboard: the operator's page (one self-contained HTML document, no
// assets from anywhere else), and GET /dashboard/data, the JSON it polls.
// Read-only. With an admin token configured the data needs it (the page asks
// for it and sends it as a bearer token); the page itself holds no data.
import type { FastifyInstance } from 'fastify';
import { adminGuard } from '../diagnostics/route.js';
import type { Diagnostics } from '../diagnostics/diagnostics.js';
import type { RouterRuntime } from '../runtime.js';
import { dashboardData } from './data.js';
import { dashboardPage } from './page.js';

export function registerDashboardRoutes(app: FastifyInstance, rt: RouterRuntime, diagnostics: Diagnostics): void {
  const page = dashboardPage({ tokenRequired: rt.config.adminToken !== null });
  app.get('/dashboard', async (_request, reply) => {
    reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store');
    return page;
  });
  const guard = adminGuard(rt);
  app.get('/dashboard/data', { onRequest: guard ? [guard] : [] }, async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return dashboardData(rt, diagnostics);
  });
}
