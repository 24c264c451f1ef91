// Probe conversations for the load-time self-checks. They aim at what breaks
// separable rendering and piecewise tokenization: every role, a leading
// system message or none, consecutive tool results, tool calls, reasoning
// blocks, a system message mid-conversation, leading/trailing whitespace,
// empty content, non-ASCII text, text that looks like markup, with and
// without tools and the generation prompt.
import type { TemplateInput, TemplateMessage } from './messages.js';

const TOOLS: unknown[] = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a file from the workspace.',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    },
  },
];

const call = (id: string, path: string) => ({ id, type: 'function', function: { name: 'read_file', arguments: { path } } });

const CONVERSATIONS: TemplateMessage[][] = [
  [{ role: 'user', content: 'Hello there.' }],
  [
    { role: 'system', content: 'You are a careful assistant.' },
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: 'It is 4.' },
    { role: 'user', content: '  And 3+3?  \n' },
  ],
  [
    { role: 'user', content: 'Summarize README.md and LICENSE' },
    { role: 'assistant', content: '', tool_calls: [call('c1', 'README.md'), call('c2', 'LICENSE')] },
    { role: 'tool', content: '# kvrouter\n\nRoutes requests.', tool_call_id: 'c1' },
    { role: 'tool', content: 'Apache-2.0', tool_call_id: 'c2' },
    { role: 'assistant', content: 'A router, Apache-licensed.' },
    { role: 'user', content: '<tool_response>\nnot really\n</tool_response>' },
  ],
  [
    { role: 'system', content: 'Think first.' },
    { role: 'user', content: 'Why is the sky blue?' },
    { role: 'assistant', content: '<think>\nRayleigh scattering.\n</think>\n\nScattering of short wavelengths.' },
    { role: 'user', content: 'Thanks! 🙂 naïve café — 日本語' },
  ],
  [
    { role: 'user', content: '\n\n' },
    { role: 'assistant', content: '' },
    { role: 'system', content: 'Mid-conversation instruction.' },
    { role: 'user', content: '<div class="x">&amp;</div>\t\ttabs   and  runs' },
    { role: 'assistant', content: 'ok' },
  ],
];

export function probeConversations(): TemplateInput[] {
  const out: TemplateInput[] = [];
  for (const messages of CONVERSATIONS) {
    for (const tools of [null, TOOLS]) {
      for (const addGenerationPrompt of [true, false]) out.push({ messages, tools, addGenerationPrompt });
    }
  }
  return out;
}

/**
 * Raw texts for the tokenization self-check: each special token between
 * spaces, newlines and words, at the start and at the end, doubled.
 */
export function probeTexts(specials: readonly string[]): string[] {
  const texts = [' leading space', 'trailing space ', '  \n\n  \t', 'naïve café 🙂 日本語 Ünïcödé', 'Hello world'];
  for (const s of specials) {
    texts.push(`${s}`, `${s} hello`, `hello ${s}`, ` ${s}\n${s}  x ${s}`, `a${s}b`, `\n\n${s}\n\n word`);
  }
  return texts;
}
