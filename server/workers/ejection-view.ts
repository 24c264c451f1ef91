// An ejection as /ready, /router/explain and the admin API show it: in words, and as JSON.
import type { EjectionView, WorkerHealthView } from './outliers.js';
import type { StallView } from './stall-watch.js';

const REASONS: Record<Exclude<EjectionView['reason'], 'stall'>, string> = {
  connect_failure: 'connection failures',
  timeout: 'connection failures or timeouts, the last a timeout',
  '5xx': '5xx answers',
};

export function describeEjection(ejection: EjectionView): string {
  if (ejection.reason === 'stall') return `ejected: stalled (no response progress for ${Math.round(ejection.stall!.quietMs)} ms, no answer to a health probe)`;
  return `ejected: ${ejection.failures} consecutive ${REASONS[ejection.reason]}`;
}

export function ejectionBody(ejection: EjectionView) {
  return {
    reason: ejection.reason,
    consecutive_failures: ejection.failures,
    ...(ejection.stall && { stalled: { quiet_ms: Math.round(ejection.stall.quietMs), requests_waiting: ejection.stall.waiting } }),
    ejections_in_a_row: ejection.streak,
    backoff_ms: ejection.backoffMs,
    ejected_ms_ago: Math.round(ejection.ejectedForMs),
    probing_in_ms: Math.round(ejection.probingInMs),
  };
}

/** A worker's health as the router sees it: the outlier detector's view and the stall watch's. */
export interface WorkerHealth extends WorkerHealthView {
  stall: StallView;
}

/** A worker's ejection state, failure streaks and stall watch, as /ready and GET /admin/workers show them. */
export function healthBody(health: WorkerHealth) {
  return {
    ejected: health.ejection && ejectionBody(health.ejection),
    consecutive_connect_failures: health.consecutiveConnectFailures,
    consecutive_5xx: health.consecutive5xx,
    in_flight: health.stall.inFlight,
    quiet_ms: health.stall.quietMs,
  };
}
