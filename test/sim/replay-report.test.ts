// The HTML report: self-contained (nothing fetched from anywhere) and one
// series per policy in each comparison chart.
import { describe, expect, it } from 'vitest';
import { renderHtmlReport } from '../../sim/replay/html-report.js';
import { parseMooncakeTrace } from '../../sim/replay/mooncake.js';
import { ProgressBar } from '../../sim/replay/progress.js';
import { replay } from '../../sim/replay/replay.js';
import { escapeHtml, linearTicks, logTicks } from '../../sim/replay/svg-chart.js';
import { formatComparison } from '../../sim/replay/table.js';
import { jsonl, sharedDocumentTrace } from './replay-fixtures.js';

const trace = parseMooncakeTrace(jsonl(sharedDocumentTrace({ requests: 30, documents: 5, docBlocks: 4, blockSize: 64, gapMs: 200 })), { traceBlockSize: 64 });
const policies = ['kv', 'round-robin', 'kv:overlap_credit=2'];
const runs = replay(trace, { policies, workers: 3, engine: { blockSize: 16, numBlocks: 2048 } });
const html = renderHtmlReport({ title: 'test <report>', settings: { workers: 3, 'event delay': '5 ms' }, runs });

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

describe('the HTML report', () => {
  it('is one self-contained page: no URLs, external scripts, stylesheets or imports', () => {
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/<script[^>]*\bsrc=/i);
    expect(html).not.toMatch(/<link\b/i);
    expect(html).not.toMatch(/@import|url\(/i);
    expect(html).toContain('<svg');
  });

  it('draws one TTFT CDF series and one reuse bar per policy', () => {
    for (const policy of policies) {
      expect(count(html, `data-chart="ttft-cdf" data-policy="${policy}"`)).toBe(1);
      expect(count(html, `data-chart="reuse" data-policy="${policy}"`)).toBe(1);
    }
    expect(count(html, 'data-chart="ttft-cdf"')).toBe(policies.length);
  });

  it('draws requests over time for every worker of every policy', () => {
    for (const policy of policies) {
      for (const worker of ['w0', 'w1', 'w2']) expect(count(html, `data-chart="worker-load" data-policy="${policy}" data-worker="${worker}"`)).toBe(1);
    }
  });

  it('escapes text it did not write itself', () => {
    expect(html).toContain('test &#60;report&#62;');
    expect(html).not.toContain('<report>');
    expect(escapeHtml(`a"b'c&`)).toBe('a&#34;b&#39;c&#38;');
  });
});

describe('chart axes', () => {
  it('linear ticks are round steps covering the range', () => {
    expect(linearTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(linearTicks(0, 47)).toEqual([0, 10, 20, 30, 40]);
  });

  it('log ticks are powers of ten, with 2 and 5 between them over a short span', () => {
    expect(logTicks(12, 5000)).toEqual([100, 1000]);
    expect(logTicks(3, 60)).toEqual([5, 10, 20, 50]);
  });
});

describe('the comparison table', () => {
  it('has one row per policy with its reuse', () => {
    const table = formatComparison(runs.map((r) => r.report));
    const rows = table.split('\n');
    for (const r of runs) {
      const row = rows.find((line) => line.startsWith(r.report.policy + ' '));
      expect(row).toBeDefined();
      expect(row).toContain(r.report.prefix_cache_reused_ratio.toFixed(3));
    }
  });
});

describe('the progress bar', () => {
  function stream(isTTY: boolean) {
    const writes: string[] = [];
    return { writes, out: { isTTY, write: (text: string) => writes.push(text) } };
  }

  it('draws on a terminal and erases itself when cleared', () => {
    const { writes, out } = stream(true);
    const bar = new ProgressBar(out);
    bar.update('kv', 1, 4);
    bar.update('kv', 4, 4);
    expect(writes[0]).toMatch(/^\rkv \[#{7}-{21}\]  25% 1\/4$/);
    expect(writes[1]).toMatch(/^\rkv \[#{28}\] 100% 4\/4$/);
    bar.clear();
    expect(writes[2]).toMatch(/^\r +\r$/);
  });

  it('writes nothing when the stream is not a terminal', () => {
    const { writes, out } = stream(false);
    const bar = new ProgressBar(out);
    bar.update('kv', 4, 4);
    bar.clear();
    expect(writes).toEqual([]);
  });
});
