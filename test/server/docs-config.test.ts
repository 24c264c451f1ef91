// Every YAML and JSON example in the configuration docs is a config the real
// loader accepts (examples of other things there are written as text or sh).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { configFromDocument, parseConfigText } from '../../server/config/load.js';

const DOCS = ['configuration.md', 'vllm-sglang.md', 'replicas.md'];

function examples(file: string): { lang: string; text: string; line: number }[] {
  const source = readFileSync(new URL(`../../docs/${file}`, import.meta.url), 'utf8');
  const out: { lang: string; text: string; line: number }[] = [];
  for (const m of source.matchAll(/^```(yaml|json)\n([\s\S]*?)^```$/gm)) {
    out.push({ lang: m[1]!, text: m[2]!, line: source.slice(0, m.index).split('\n').length });
  }
  return out;
}

describe.each(DOCS)('docs/%s', (file) => {
  const found = examples(file);
  it('has config examples', () => expect(found.length).toBeGreaterThan(0));
  it.each(found.map((e) => [`${e.lang} example at line ${e.line}`, e] as const))('%s loads through the config loader', (_name, example) => {
    const document = parseConfigText(example.text, `${file}.${example.lang}`);
    const config = configFromDocument(document);
    expect(config.models.length + config.workers.length).toBeGreaterThan(0);
  });
});
