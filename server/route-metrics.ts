// Scrape-time metrics of what each model's route holds per request: lanes,
// ledger bookings and session bindings. Each returns to zero when traffic
// stops (bindings after their TTL), so a leak shows as a line that never comes
// down; the sweep's counts show what it reclaimed and which streams outlived
// its age.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { MetricsSource } from './metrics.js';

export function registerRouteMetrics(source: MetricsSource, registers: Registry[]): void {
  new Gauge({
    name: 'kvrouter_queue_lanes',
    help: 'Lanes holding queued requests (the shared lane, one per session, one per classifier-named lane), by policy class',
    labelNames: ['model', 'policy_class'],
    registers,
    collect() {
      this.reset();
      for (const m of source.models()) {
        for (const [cls, q] of Object.entries(m.route.scheduler.stats().queued)) this.labels(m.name, cls).set(q.lanes);
      }
    },
  });
  new Gauge({
    name: 'kvrouter_ledger_bookings',
    help: "Requests booked in the model's load ledger (this router's and, with replicas, its peers')",
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of source.models()) this.labels(m.name).set(m.route.fleet.bookedRequests);
    },
  });
  new Counter({
    name: 'kvrouter_ledger_reclaimed_total',
    help: 'Bookings the ledger sweep reclaimed because no live request held them past limits.ledger_sweep_age_ms',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of source.models()) this.labels(m.name).inc(m.route.sweepStats.reclaimed);
    },
  });
  new Gauge({
    name: 'kvrouter_ledger_long_running',
    help: 'Bookings older than limits.ledger_sweep_age_ms that the last sweep kept because their request is still live',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of source.models()) this.labels(m.name).set(m.route.sweepStats.longRunning);
    },
  });
  new Gauge({
    name: 'kvrouter_session_bindings',
    help: 'Sessions bound to a worker (session affinity), until their idle TTL',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of source.models()) if (m.route.sessions) this.labels(m.name).set(m.route.sessions.size);
    },
  });
}
