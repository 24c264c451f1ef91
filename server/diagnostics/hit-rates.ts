// Prefix hit rates per model and worker rank, the two ways users ask for
// them: token-weighted (cached / prompt tokens summed over requests) and
// request-weighted (the mean over requests of each one's cached fraction);
// and from two sources: what the router predicted when it chose the worker
// (every dispatched request) and what the engine reported in its response's
// usage (the responses that carried cached_tokens).
import { Counter, Gauge, type Registry } from 'prom-client';

export type HitSource = 'predicted' | 'reported';

export interface HitTotals {
  requests: number;
  promptTokens: number;
  cachedTokens: number;
  /** Sum over requests of cached / prompt tokens. */
  fractionSum: number;
}

export interface HitRates {
  token: number | null;
  request: number | null;
}

const zero = (): HitTotals => ({ requests: 0, promptTokens: 0, cachedTokens: 0, fractionSum: 0 });

export function ratesOf(t: HitTotals): HitRates {
  return { token: t.promptTokens > 0 ? t.cachedTokens / t.promptTokens : null, request: t.requests > 0 ? t.fractionSum / t.requests : null };
}

export class HitAccounting {
  /** model -> worker label -> source -> totals */
  private readonly totals = new Map<string, Map<string, Record<HitSource, HitTotals>>>();

  record(model: string, worker: string, source: HitSource, promptTokens: number, cachedTokens: number): void {
    let byWorker = this.totals.get(model);
    if (!byWorker) this.totals.set(model, (byWorker = new Map()));
    let entry = byWorker.get(worker);
    if (!entry) byWorker.set(worker, (entry = { predicted: zero(), reported: zero() }));
    const t = entry[source];
    const cached = Math.min(cachedTokens, promptTokens);
    t.requests++;
    t.promptTokens += promptTokens;
    t.cachedTokens += cached;
    if (promptTokens > 0) t.fractionSum += cached / promptTokens;
  }

  of(model: string, worker: string): Record<HitSource, HitTotals> {
    return this.totals.get(model)?.get(worker) ?? { predicted: zero(), reported: zero() };
  }

  /** Totals over the model's workers. */
  ofModel(model: string): Record<HitSource, HitTotals> {
    const out = { predicted: zero(), reported: zero() };
    for (const entry of this.totals.get(model)?.values() ?? []) {
      for (const source of ['predicted', 'reported'] as const) {
        const t = entry[source];
        const o = out[source];
        o.requests += t.requests;
        o.promptTokens += t.promptTokens;
        o.cachedTokens += t.cachedTokens;
        o.fractionSum += t.fractionSum;
      }
    }
    return out;
  }

  /** Forgets a removed worker. */
  drop(model: string, worker: string): void {
    this.totals.get(model)?.delete(worker);
  }

  private *rows(): Generator<[string, string, HitSource, HitTotals]> {
    for (const [model, byWorker] of this.totals) {
      for (const [worker, entry] of byWorker) for (const source of ['predicted', 'reported'] as const) yield [model, worker, source, entry[source]];
    }
  }

  registerMetrics(registers: Registry[]): void {
    const rows = () => this.rows();
    const labelNames = ['model', 'worker', 'source'] as const;
    const counter = (name: string, help: string, value: (t: HitTotals) => number) =>
      new Counter({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          for (const [model, worker, source, t] of rows()) if (t.requests > 0) this.labels(model, worker, source).inc(value(t));
        },
      });
    counter('kvrouter_prefix_requests_total', 'Requests counted in the prefix hit rates, by source (predicted: dispatched; reported: responses whose usage had cached_tokens)', (t) => t.requests);
    counter('kvrouter_prefix_prompt_tokens_total', 'Prompt tokens of the requests counted in the prefix hit rates, by source', (t) => t.promptTokens);
    counter('kvrouter_prefix_cached_tokens_total', 'Cached prompt tokens, by source (predicted: the overlap the router chose the worker for; reported: the engine\'s cached_tokens)', (t) => t.cachedTokens);
    new Gauge({
      name: 'kvrouter_prefix_hit_rate',
      help: 'Prefix hit rate per worker rank: weight=token (cached / prompt tokens) or weight=request (mean per-request cached fraction), by source (predicted or reported)',
      labelNames: [...labelNames, 'weight'],
      registers,
      collect() {
        this.reset();
        for (const [model, worker, source, t] of rows()) {
          const r = ratesOf(t);
          if (r.token !== null) this.labels(model, worker, source, 'token').set(r.token);
          if (r.request !== null) this.labels(model, worker, source, 'request').set(r.request);
        }
      },
    });
  }
}
