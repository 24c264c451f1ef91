// An ejection as /ready and /router/explain show it: in words, and as JSON.
import type { EjectionView } from './outliers.js';

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
