// npm run bench [-- --json] [--quick] [--only <suite>[,<suite>...]]
//
// Prints a table for people; with --json, one JSON object of figures on the
// last line of stdout (use `npm run --silent bench -- --json` to drop npm's
// banner). The table then goes to stderr.
import { meetsGoal, type Figure } from './figures.js';
import { suites } from './suites.js';

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const onlyAt = args.indexOf('--only');
const only = onlyAt >= 0 ? new Set((args[onlyAt + 1] ?? '').split(',')) : undefined;

function formatTable(rows: Figure[]): string {
  const cells = rows.map((f) => {
    const met = f.goal ? meetsGoal(f.value, f.goal) : undefined;
    return [f.key, String(f.value), f.unit, f.goal ? `${f.goal}${met === undefined ? '' : met ? ' (met)' : ' (MISSED)'}` : '', f.note ?? ''];
  });
  const head = ['figure', 'value', 'unit', 'goal', 'note'];
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => v.padEnd(widths[i]!)).join('  ').trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

const figures: Figure[] = [];
const started = Date.now();
for (const suite of suites) {
  if (only && !only.has(suite.name)) continue;
  process.stderr.write(`bench: ${suite.name}...\n`);
  figures.push(...(await suite.run({ quick })));
}
const table = formatTable(figures) + `\n(${((Date.now() - started) / 1000).toFixed(1)} s${quick ? ', --quick' : ''})`;
if (json) {
  process.stderr.write(table + '\n');
  process.stdout.write(JSON.stringify(Object.fromEntries(figures.map((f) => [f.key, f.value]))) + '\n');
} else {
  process.stdout.write(table + '\n');
}
