// fast-check generators of chat requests for the tokenization property tests:
// roles, unicode and emoji, whitespace runs, text that looks like markup or
// like template markers, tool calls, tools, multi-part and null content.
import fc from 'fast-check';
import type { ChatMessage, ChatOptions } from '../../router/tokenize/index.js';

const MARKUP = [
  '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>', '<tool_call>', '</tool_call>',
  '<tool_response>', '</tool_response>', '<s>', '</s>', '[INST]', '<div class="a">', '{{ messages }}', '{% if x %}', '\\n',
];

const chunk = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
  fc.constantFrom(' ', '  ', '\n', '\n\n', '\t', ' \n ', '   \n\n\t'),
  fc.constantFrom(...MARKUP),
  fc.constantFrom('🙂', '👩‍💻', '日本語', 'naïve', 'Ünïcödé', '١٢٣', '\u200b'),
  fc.constantFrom('hello', ' world', 'function f(x) { return x * 2; }', '1234567', "it's", ' you\'re'),
);

export const text = fc.array(chunk, { maxLength: 8 }).map((parts) => parts.join(''));

const toolCall = fc.record({
  id: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 6 }),
  type: fc.constant('function'),
  function: fc.record({
    name: fc.constantFrom('read_file', 'search', 'run'),
    arguments: fc.oneof(
      fc.dictionary(fc.constantFrom('path', 'q', 'n'), fc.oneof(text, fc.integer())).map((o) => JSON.stringify(o)),
      text,
    ),
  }),
});

const content: fc.Arbitrary<ChatMessage['content']> = fc.oneof(
  { weight: 6, arbitrary: text },
  { weight: 1, arbitrary: fc.array(text.map((t) => ({ type: 'text', text: t })), { minLength: 1, maxLength: 3 }) },
  { weight: 1, arbitrary: fc.constant(null) },
);

export const message: fc.Arbitrary<ChatMessage> = fc
  .record({
    role: fc.constantFrom('system', 'user', 'user', 'assistant', 'assistant', 'tool'),
    content,
    calls: fc.option(fc.array(toolCall, { minLength: 1, maxLength: 2 }), { freq: 4 }),
  })
  .map(({ role, content, calls }) => {
    const m: ChatMessage = { role, content };
    if (role === 'assistant' && calls !== null) m.tool_calls = calls;
    if (role === 'tool') m.tool_call_id = 'call-1';
    return m;
  });

export const tool = fc.record({
  type: fc.constant('function'),
  function: fc.record({ name: fc.constantFrom('read_file', 'search'), description: text, parameters: fc.constant({ type: 'object', properties: {} }) }),
});

export const conversation = fc.array(message, { minLength: 1, maxLength: 7 });

export const chatOptions: fc.Arbitrary<ChatOptions> = fc.record({
  tools: fc.option(fc.array(tool, { minLength: 1, maxLength: 2 }), { nil: undefined }),
  addGenerationPrompt: fc.boolean(),
});

/** File access over an in-memory directory; a missing file fails like fs does. */
export function memoryIO(files: Record<string, string>): { readFile(path: string): Promise<string> } {
  return {
    async readFile(path: string) {
      const text = files[path];
      if (text === undefined) throw Object.assign(new Error(`ENOENT: no such file, open '${path}'`), { code: 'ENOENT' });
      return text;
    },
  };
}
