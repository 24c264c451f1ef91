// renderChatml (the shipped ChatML template as code) writes exactly what
// CHATML_TEMPLATE writes under Jinja, for any messages, tools and tool calls,
// including JSON values the `tojson` filter formats in its own way.
import { Template } from '@huggingface/jinja';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChatRenderer } from '../../router/tokenize/chat-renderer.js';
import { CHATML_NATIVE, CHATML_TEMPLATE, renderChatml } from '../../router/tokenize/chatml.js';
import { normalizeChat } from '../../router/tokenize/messages.js';
import { chatOptions, conversation } from './tokenize-arbitraries.js';

const jinja = new Template(CHATML_TEMPLATE);
const render = (messages: Parameters<typeof renderChatml>[0], tools: unknown[] | null, gen: boolean) =>
  jinja.render({ messages, tools, add_generation_prompt: gen });

const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.string(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 6 }), tie('value'), { maxKeys: 3 }),
  ),
})).value;

describe('renderChatml', () => {
  it('equals the Jinja template on generated conversations', () => {
    fc.assert(
      fc.property(conversation, chatOptions, (messages, options) => {
        const input = normalizeChat(messages, options);
        expect(renderChatml(input.messages, input.tools, input.addGenerationPrompt)).toBe(render(input.messages, input.tools, input.addGenerationPrompt));
      }),
      { numRuns: 200 },
    );
  });

  it('formats tools and tool calls as `tojson` does, with or without a function field', () => {
    fc.assert(
      fc.property(fc.array(json, { minLength: 1, maxLength: 3 }), json, fc.boolean(), (tools, args, wrapped) => {
        const call = wrapped ? { id: 'c', type: 'function', function: { name: 'f', arguments: args } } : { name: 'f', arguments: args };
        const messages = [
          { role: 'system', content: 'sys' },
          { role: 'assistant', content: '', tool_calls: [call] },
        ];
        expect(renderChatml(messages, tools, true)).toBe(render(messages, tools, true));
      }),
      { numRuns: 200 },
    );
  });

  it('rendered segment by segment (each later message written on its own), a conversation and its next turn equal the Jinja template whole', () => {
    fc.assert(
      fc.property(conversation, conversation, chatOptions, (messages, more, options) => {
        const renderer = new ChatRenderer(CHATML_NATIVE, {}, 1 << 16, 'chatml');
        for (const turn of [messages, [...messages, ...more]]) {
          const input = normalizeChat(turn, options);
          expect(renderer.render(input)).toBe(render(input.messages, input.tools, input.addGenerationPrompt));
        }
        expect(renderer.mode).toBe('segmented');
        expect(renderer.fallbacks).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});
