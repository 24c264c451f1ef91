// The `diagnostics` section of the router config.
import type { Fields } from '../config/fields.js';

export interface DiagnosticsConfig {
  /** A rank sent requests that has had no KV event for this long is silent; a lost stream counts as stale this long (ms). */
  silentAfterMs: number;
  /** Reported cached tokens may differ from the predicted overlap by one block plus this fraction of the prompt. */
  cachedTokensTolerance: number;
}

export const DIAGNOSTICS_DEFAULTS: DiagnosticsConfig = { silentAfterMs: 30_000, cachedTokensTolerance: 0.1 };

export function readDiagnostics(f: Fields): DiagnosticsConfig {
  const d = DIAGNOSTICS_DEFAULTS;
  return {
    silentAfterMs: f.number('silent_after_ms', d.silentAfterMs, { integer: true, min: 100, max: 86_400_000 }),
    cachedTokensTolerance: f.number('cached_tokens_tolerance', d.cachedTokensTolerance, { min: 0, max: 1 }),
  };
}
