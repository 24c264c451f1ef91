// The replay report's line chart: reference lines (the TTFT floors, an SLO)
// each get a label at the plot's right edge.
import { describe, expect, it } from 'vitest';
import { lineChart } from '../../sim/replay/svg-chart.js';

const series = [{ label: 'ttft', color: '#1f77b4', points: [[1, 100], [4, 200]] as [number, number][] }];

function referenceLabels(svg: string): string[] {
  return [...svg.matchAll(/<text class="tick reference-label"[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);
}

describe('lineChart references', () => {
  it('draws references of one value once, naming both, so their labels never print over each other', () => {
    const svg = lineChart({ title: 't', xLabel: 'x', yLabel: 'y', series, references: [{ y: 80, label: '(ideal)' }, { y: 80, label: '(fleet LRU)' }, { y: 90, label: 'SLO' }] });
    expect(referenceLabels(svg)).toEqual(['(ideal) = (fleet LRU)', 'SLO']);
    expect(svg.match(/<line class="reference"/g)).toHaveLength(2);
  });

  it('keeps references of different values apart', () => {
    const svg = lineChart({ title: 't', xLabel: 'x', yLabel: 'y', series, references: [{ y: 60, label: '(ideal)' }, { y: 80, label: '(fleet LRU)' }] });
    expect(referenceLabels(svg)).toEqual(['(ideal)', '(fleet LRU)']);
  });
});

describe('lineChart legend', () => {
  it('is drawn only when asked for', () => {
    const spec = { title: 't', xLabel: 'x', yLabel: 'y', series };
    expect(lineChart(spec)).not.toContain('class="legend"');
    expect(lineChart({ ...spec, legend: true })).toContain('class="legend"');
  });
});
