// An ejection as /ready, /router/explain and the admin API show it: in words, and as JSON.
import type { EjectionView, WorkerHealthView } from './outliers.js';

const REASONS: Record<EjectionView['reason'], string> = {
  connect_failure: 'connection failures',
  timeout: 'connection failures or timeouts, the last a timeout',
  '5xx': '5xx answers',
};

export function describeEjection(ejection: EjectionView): string {
  return `ejected: ${ejection.failures} consecutive ${REASONS[ejection.reason]}`;
}

export function ejectionBody(ejection: EjectionView) {
  return {
    reason: ejection.reason,
    consecutive_failures: ejection.failures,
    ejections_in_a_row: ejection.streak,
    backoff_ms: ejection.backoffMs,
    ejected_ms_ago: Math.round(ejection.ejectedForMs),
    probing_in_ms: Math.round(ejection.probingInMs),
  };
}

/** A worker's ejection state and failure streaks, as /ready and GET /admin/workers show them. */
export function healthBody(health: WorkerHealthView) {
  return {
    ejected: health.ejection && ejectionBody(health.ejection),
    consecutive_connect_failures: health.consecutiveConnectFailures,
    consecutive_5xx: health.consecutive5xx,
  };
}
