// The instruments every request updates (histograms of its timings, counters
// of how it ended), as plain numbers bumped in place. prom-client's own
// metrics hash their label values on every update; these resolve a series
// once and are read by the registry only at scrape time, in the same
// exposition format (the registry reads any object with name, help, type
// and get()).
import type { Metric, Registry } from 'prom-client';

interface Sample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

interface Scrape {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: Sample[];
  aggregator: 'sum';
}

function register(registry: Registry, metric: { name: string; get(): Scrape }): void {
  registry.registerMetric(metric as unknown as Metric);
}

/** One histogram series: per-bucket counts (the last is +Inf), their sum and count. */
export class HistogramSeries {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Record<string, string>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** A histogram with one label, its series created on first use. */
export class HistogramFamily {
  readonly type = 'histogram';
  private readonly series = new Map<string, HistogramSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    register(registry, this);
  }

  child(labelValue: string): HistogramSeries {
    let found = this.series.get(labelValue);
    if (!found) {
      found = new HistogramSeries({ [this.labelName]: labelValue }, this.bounds);
      this.series.set(labelValue, found);
    }
    return found;
  }

  get(): Scrape {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += s.counts[i]!;
        values.push({ value: cumulative, labels: { le, ...s.labels }, metricName: bucket });
      });
      values.push({ value: s.count, labels: { le: '+Inf', ...s.labels }, metricName: bucket });
      values.push({ value: s.sum, labels: s.labels, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: s.labels, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: 'sum' };
  }
}

/** One counter series. */
export class CounterSeries {
  value = 0;

  constructor(readonly labels: Record<string, string>) {}

  inc(by = 1): void {
    this.value += by;
  }
}

/** A counter with labels, its series found by their values (joined into one key). */
export class CounterFamily {
  readonly type = 'counter';
  private readonly series = new Map<string, CounterSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    register(registry, this);
  }

  child(...labelValues: string[]): CounterSeries {
    const key = labelValues.join('\u0000');
    let found = this.series.get(key);
    if (!found) {
      found = new CounterSeries(Object.fromEntries(this.labelNames.map((n, i) => [n, labelValues[i] ?? ''])));
      this.series.set(key, found);
    }
    return found;
  }

  get(): Scrape {
    return { name: this.name, help: this.help, type: this.type, values: [...this.series.values()].map((s) => ({ value: s.value, labels: s.labels })), aggregator: 'sum' };
  }
}
