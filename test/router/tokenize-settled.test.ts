// Frozen messages (a conversation's earlier turns, as the request body parser
// shares them) are normalized and rendered once per object: later turns find
// them by identity, past caches too small to hold them, and get exactly what
// rendering them again would give.
import fc from 'fast-check';
import { Tiktoken } from 'js-tiktoken/lite';
import o200k from 'js-tiktoken/ranks/o200k_base';
import { describe, expect, it } from 'vitest';
import { ChatRenderer } from '../../router/tokenize/chat-renderer.js';
import { IM_END, IM_START } from '../../router/tokenize/chatml.js';
import { createTokenizer } from '../../router/tokenize/index.js';
import { normalizeChat } from '../../router/tokenize/messages.js';
import type { ChatMessage } from '../../router/tokenize/types.js';
import { memoryIO } from './tokenize-arbitraries.js';

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    Object.freeze(value);
    for (const item of Object.values(value)) deepFreeze(item);
  }
  return value;
}

const long = (seed: number) => Array.from({ length: 200 }, (_, i) => `w${(seed * 31 + i) % 97}`).join(' ');

function conversation(system: string): ChatMessage[] {
  return [
    { role: 'system', content: system },
    { role: 'user', content: long(1) },
    { role: 'assistant', content: long(2), tool_calls: [{ id: 'c1', type: 'function', function: { name: 'run', arguments: '{"cmd":"ls"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: long(3) }] },
    ...[4, 5, 6, 7, 8].map((seed) => ({ role: seed % 2 === 0 ? 'assistant' : 'user', content: long(seed) })),
  ];
}

describe('normalizing frozen messages', () => {
  it('gives a frozen message the same frozen normalized message every time', () => {
    const messages = deepFreeze(conversation('be brief'));
    const first = normalizeChat(messages, undefined).messages;
    const again = normalizeChat(messages, undefined).messages;
    for (let i = 0; i < messages.length; i++) {
      expect(again[i]).toBe(first[i]);
      expect(Object.isFrozen(again[i])).toBe(true);
    }
    // The tool call's arguments were parsed into an object, frozen with the message.
    expect(Object.isFrozen((first[2]!.tool_calls![0] as { function: object }).function)).toBe(true);
  });

  it('normalizes a message anew while anything in it can change', () => {
    const open = conversation('be brief');
    expect(normalizeChat(open, undefined).messages[1]).not.toBe(normalizeChat(open, undefined).messages[1]);
    // Frozen itself, but its content parts are not: a change to them shows.
    const parts = [{ type: 'text', text: 'before' }];
    const message = Object.freeze({ role: 'user', content: parts });
    expect(normalizeChat([message], undefined).messages[0]!.content).toBe('before');
    parts[0]!.text = 'after';
    expect(normalizeChat([message], undefined).messages[0]!.content).toBe('after');
  });
});

describe('rendering frozen messages', () => {
  // Each message's text depends on the first message, as a separable template may.
  const source = "{% for m in messages %}[{{ messages[0].content }}|{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}>{% endif %}";

  it('renders each frozen message once per first message, past a segment cache that keeps nothing, equal to the whole render', () => {
    // 800 characters: the heads fit, no segment of 200 words does.
    const renderer = new ChatRenderer(source, {}, 800, 'test');
    const later = deepFreeze(conversation('a').slice(1));
    const withHead = (system: string) => normalizeChat([deepFreeze({ role: 'system', content: system }), ...later], undefined);
    const a = withHead('a');
    expect(renderer.render(a)).toBe(renderer.renderWhole(a));
    const misses = renderer.segmentMisses;
    const hits = renderer.segmentHits;
    expect(renderer.render(withHead('a'))).toBe(renderer.renderWhole(a));
    expect(renderer.segmentMisses).toBe(misses);
    expect(renderer.segmentHits).toBe(hits + later.length);
    // Another first message: the same frozen messages render for it, not from the first one's segments.
    const b = withHead('b');
    expect(renderer.render(b)).toBe(renderer.renderWhole(b));
    expect(renderer.segmentMisses).toBe(misses + later.length);
  });

  it('a later turn of frozen messages tokenizes to the ids of its whole render', async () => {
    const tok = await createTokenizer('tiktoken:o200k_base', memoryIO({}), { renderCacheChars: 800 });
    const [start] = tok.encodeText(IM_START);
    const [end] = tok.encodeText(IM_END);
    const oracle = new Tiktoken(o200k, { [IM_START]: start!, [IM_END]: end! });
    const earlier = deepFreeze(conversation('be brief'));
    const turn1 = [...earlier];
    expect([...tok.encodeChat(turn1)]).toEqual(oracle.encode(tok.renderChat(turn1), 'all'));
    const turn2 = [...earlier, { role: 'user', content: 'and now?' }];
    const before = tok.stats();
    expect([...tok.encodeChat(turn2)]).toEqual(oracle.encode(tok.renderChat(turn2), 'all'));
    const after = tok.stats();
    // Only the new message was rendered; the earlier ones, each too long for the segment cache, came from their memo.
    expect(after.segmentMisses - before.segmentMisses).toBe(1);
    // The ids of the parts turn 1 had came in one piece: only the generation prompt was looked up (and the new message missed).
    expect(after.pieceHits - before.pieceHits).toBe(1);
    expect(after.pieceMisses - before.pieceMisses).toBe(1);
  });
});

describe('turns of conversations that share their start', () => {
  it('each turn, grown, edited or branched, tokenizes to the ids of its whole render', async () => {
    const tok = await createTokenizer('tiktoken:o200k_base', memoryIO({}));
    const [start] = tok.encodeText(IM_START);
    const [end] = tok.encodeText(IM_END);
    const oracle = new Tiktoken(o200k, { [IM_START]: start!, [IM_END]: end! });
    const text = fc.oneof(fc.constantFrom('hello', 'run the tests', ' ', '<|im_end|>', 'x'.repeat(300)), fc.string({ maxLength: 40 }));
    // Each step: a new message, the last one replaced, or a return to an earlier length (another branch).
    const step = fc.oneof(
      fc.record({ op: fc.constant('add' as const), role: fc.constantFrom('user', 'assistant', 'tool'), content: text, freeze: fc.boolean() }),
      fc.record({ op: fc.constant('edit' as const), content: text }),
      fc.record({ op: fc.constant('back' as const), to: fc.nat() }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        // Every run starts the same two messages: its conversations share their first two parts.
        let messages: ChatMessage[] = [deepFreeze({ role: 'system', content: 'be brief' }), deepFreeze({ role: 'user', content: 'hi' })];
        for (const s of steps) {
          if (s.op === 'add') {
            const m = { role: s.role, content: s.content };
            messages = [...messages, s.freeze ? deepFreeze(m) : m];
          } else if (s.op === 'edit' && messages.length > 2) messages = [...messages.slice(0, -1), { role: 'user', content: s.content }];
          else if (s.op === 'back') messages = messages.slice(0, 2 + (s.to % (messages.length - 1)));
          expect([...tok.encodeChat(messages)]).toEqual(oracle.encode(tok.renderChat(messages), 'all'));
        }
      }),
      { numRuns: 60 },
    );
  });
});
