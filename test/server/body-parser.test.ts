// Request bodies parsed with reuse of a conversation's earlier turns: every
// body parses to exactly what JSON.parse makes of it, and every malformed one
// fails exactly as a whole parse does, whatever came before it; reuse happens
// when a turn resends earlier messages byte for byte.
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../server/config/schema.js';
import { BodyParser, MIN_REUSE_BYTES } from '../../server/request/body-parser.js';
import { parseJsonBody } from '../../server/request/fields.js';

type Member = [string, unknown];

const SPACES = [' ', '\n', '\t', '\r\n', '  '];

/** JSON text of an object from members in order (duplicates allowed), with the given whitespace after each separator. */
function objectText(members: Member[], space: (i: number) => string): string {
  return `{${members.map(([k, v], i) => `${space(i)}${JSON.stringify(k)}${space(i + 1)}:${space(i + 2)}${valueText(v, space)}`).join(',')}${space(members.length)}}`;
}

function valueText(value: unknown, space: (i: number) => string): string {
  if (Array.isArray(value)) return `[${value.map((v, i) => space(i) + JSON.stringify(v)).join(',')}${space(value.length)}]`;
  return JSON.stringify(value);
}

/** A conversation long enough to be kept: the first message carries the padding. */
function conversation(messages: unknown[]): unknown[] {
  return [{ role: 'system', content: 'Be brief. '.repeat(Math.ceil(MIN_REUSE_BYTES / 10)) }, ...messages];
}

function body(before: Member[], messages: unknown[], after: Member[], spacing = 0): Buffer {
  const space = (i: number) => (spacing === 0 ? '' : SPACES[(i * spacing) % SPACES.length]!);
  return Buffer.from(objectText([...before, ['messages', messages], ...after], space));
}

function failure(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Parses with the parser and checks the result (or the error) against a whole parse. */
function check(parser: BodyParser, raw: Buffer): void {
  const expected = failure(() => parseJsonBody(raw));
  if (expected !== null) {
    expect(failure(() => parser.parse(raw))).toBe(expected);
    return;
  }
  const got = parser.parse(raw);
  expect(isDeepStrictEqual(got, JSON.parse(raw.toString('utf8')))).toBe(true);
}

const text = fc.string({ unit: 'binary', maxLength: 40 });
const message = fc.oneof(
  fc.record({ role: fc.constantFrom('user', 'assistant', 'tool'), content: text }),
  fc.record({ role: fc.constant('assistant'), content: fc.constant(null), tool_calls: fc.array(fc.jsonValue({ maxDepth: 3 }), { maxLength: 2 }) }),
  fc.jsonValue({ maxDepth: 4 }),
);
/** Keys a body may carry around its messages, "messages" and "__proto__" among them (as JSON allows). */
const key = fc.constantFrom('model', 'stream', 'max_tokens', 'tools', 'user', 'messages', '__proto__', 'mess\u0061ges', '');
const member = fc.tuple(key, fc.jsonValue({ maxDepth: 2 })) as fc.Arbitrary<Member>;

/** A turn derived from the last: what clients do to a conversation between requests. */
const step = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), messages: fc.array(message, { minLength: 1, maxLength: 3 }) }),
  fc.record({ kind: fc.constant('replace-last' as const), messages: fc.array(message, { minLength: 1, maxLength: 2 }) }),
  fc.record({ kind: fc.constant('edit' as const), at: fc.nat(), message }),
  fc.record({ kind: fc.constant('truncate' as const), count: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant('after' as const), after: fc.array(member, { maxLength: 3 }) }),
  fc.record({ kind: fc.constant('spacing' as const), spacing: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('corrupt' as const), at: fc.nat(), byte: fc.constantFrom(0x2c, 0x5d, 0x7d, 0x22, 0x5c, 0x20, 0x41, 0x7b) }),
);

describe('body parser', () => {
  it('parses every turn of a conversation as JSON.parse does, and fails as a whole parse does', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('model', 'stream', 'user', '__proto__'), fc.jsonValue({ maxDepth: 2 })) as fc.Arbitrary<Member>, { maxLength: 2 }),
        fc.array(message, { maxLength: 4 }),
        fc.array(member, { maxLength: 2 }),
        fc.array(step, { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        (before, first, firstAfter, steps, small) => {
          // A small arena is written round within a conversation: kept bodies are overwritten while others are reused.
          const parser = small ? new BodyParser(3 * MIN_REUSE_BYTES) : new BodyParser(DEFAULTS.limits.bodyReuseBytes);
          let messages = conversation(first);
          let after = firstAfter;
          let spacing = 0;
          check(parser, body(before, messages, after, spacing));
          for (const s of steps) {
            if (s.kind === 'append') messages = [...messages, ...s.messages];
            else if (s.kind === 'replace-last') messages = [...messages.slice(0, -1), ...s.messages];
            else if (s.kind === 'edit') messages = messages.map((m, i) => (i === s.at % messages.length ? s.message : m));
            else if (s.kind === 'truncate') messages = messages.slice(0, Math.max(1, messages.length - s.count));
            else if (s.kind === 'after') after = s.after;
            else if (s.kind === 'spacing') spacing = s.spacing;
            let raw = body(before, messages, after, spacing);
            if (s.kind === 'corrupt') {
              // A byte changed past the first message: where reuse would start parsing.
              const from = raw.lastIndexOf('Be brief.') + 10;
              raw = Buffer.from(raw);
              raw[from + (s.at % (raw.length - from))] = s.byte;
            }
            check(parser, raw);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('parses interleaved conversations as JSON.parse does while each one grows in place in the arena', () => {
    // Turns that extend a conversation are kept where its last turn was when nothing was written after it,
    // copying only the new bytes; another conversation's turn in between, or the arena's end, moves it.
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(2), fc.boolean(), fc.array(message, { minLength: 1, maxLength: 2 })), { minLength: 2, maxLength: 14 }),
        fc.constantFrom(3 * MIN_REUSE_BYTES, 5 * MIN_REUSE_BYTES, DEFAULTS.limits.bodyReuseBytes),
        (turns, budget) => {
          const parser = new BodyParser(budget);
          const chats = [0, 1, 2].map((c) => conversation([{ role: 'user', content: `conversation ${c}` }]));
          for (const [c, replace, added] of turns) {
            chats[c] = replace && chats[c]!.length > 2 ? [...chats[c]!.slice(0, -1), ...added] : [...chats[c]!, ...added];
            check(parser, body([['model', 'm']], chats[c]!, [['stream', true]]));
            expect(parser.keptBytes).toBeLessThanOrEqual(budget);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('reuses a conversation turn after turn when each turn extends the last', () => {
    const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
    let history = conversation([{ role: 'user', content: 'start' }]);
    parser.parse(body([['model', 'm']], history, []));
    for (let turn = 1; turn <= 20; turn++) {
      history = [...history, { role: 'assistant', content: `answer ${turn}` }, { role: 'user', content: `question ${turn}` }];
      const raw = body([['model', 'm']], history, []);
      expect(parser.parse(raw)).toEqual(JSON.parse(raw.toString('utf8')));
      expect(parser.reuse.bodies).toBe(turn);
    }
    // One body per conversation stays kept: each turn took its predecessor's place.
    expect(parser.keptBytes).toBe(body([['model', 'm']], history, []).length);

    // The same history with a new last question each time (a fresh question on a long context) also takes its place.
    for (let i = 0; i < 10; i++) {
      const raw = body([['model', 'm']], [...history, { role: 'user', content: `question ${i}` }], []);
      expect(parser.parse(raw)).toEqual(JSON.parse(raw.toString('utf8')));
      expect(parser.reuse.bodies).toBe(21 + i);
      expect(parser.keptBytes).toBe(raw.length);
    }
  });

  it('parses only the new turn when a conversation resends its earlier messages', () => {
    const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
    const history = conversation([{ role: 'user', content: 'fix the test' }, { role: 'assistant', content: 'done' }]);
    const first = body([['model', 'm']], history, [['stream', true]]);
    parser.parse(first);
    expect(parser.reuse).toEqual({ bodies: 0, bytes: 0 });

    const next = body([['model', 'm']], [...history, { role: 'user', content: 'and the docs' }], [['stream', true]]);
    const parsed = parser.parse(next);
    expect(parsed.messages).toEqual([...history, { role: 'user', content: 'and the docs' }]);
    expect(parsed.stream).toBe(true);
    expect(parser.reuse.bodies).toBe(1);
    // Everything through the assistant's answer came from the first body's parse.
    expect(parser.reuse.bytes).toBe(first.indexOf(']'));

    // The same history with another last question reuses all but the last message.
    const edited = body([['model', 'm']], [...history.slice(0, -1), { role: 'assistant', content: 'not yet' }], [['stream', false]]);
    expect(parser.parse(edited).stream).toBe(false);
    expect(parser.reuse.bodies).toBe(2);
  });

  it('takes the rest of a kept prefix only when the whole body is JSON', () => {
    const history = conversation([{ role: 'user', content: 'hello' }]);
    const kept = body([['model', 'm']], history, []);
    // The bytes through the last kept message, then each tail.
    const prefix = kept.subarray(0, kept.lastIndexOf(']')).toString('utf8');
    const tails = [
      ']}', ' ] } ', '],"stream":true}', '], "model": "n"}', ',{"role":"user","content":"x"} ]}', ',{"a":[1,{"b":"]"}]}]}', ']}\n',
      ',]}', '],}', ']} x', ']}}', ']]}', '],"a":1,}', ', ]}', ']', '],', ',{"a":1}', ']x}', '],"messages":[]}', '],"__proto__":{}}', ',{"a":1}}]}', ',"x"]}', '] ,"a" 1}',
    ];
    for (const tail of tails) {
      const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
      parser.parse(kept);
      check(parser, Buffer.from(prefix + tail));
    }
  });

  it('does not keep values a later member of the same name replaced', () => {
    const history = conversation([{ role: 'user', content: 'hello' }]);
    const next = body([['model', 'first']], [...history, { role: 'user', content: 'next' }], []);
    // JSON.parse keeps the second model, or the second messages array; the bytes reused hold the first ones.
    for (const after of [[['model', 'second']], [['messages', [{ role: 'user', content: 'other' }, { role: 'user', content: 'one' }]]]] as Member[][]) {
      const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
      check(parser, body([['model', 'first']], history, after));
      check(parser, next);
    }
  });

  it('shares reused values frozen, so no request can change another one\'s', () => {
    const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
    const history = conversation([{ role: 'user', content: 'hello' }]);
    const tools = [{ type: 'function', function: { name: 'run' } }];
    parser.parse(body([['tools', tools]], history, []));
    const again = parser.parse(body([['tools', tools]], [...history, { role: 'user', content: 'again' }], []));
    expect(parser.reuse.bodies).toBe(1);
    expect(() => (again.tools as unknown[]).push('another')).toThrow(TypeError);
    // One message from the first body's parse, one from the second's tail.
    for (const i of [1, 2]) {
      const shared = (again.messages as { content: string }[])[i]!;
      expect(() => {
        shared.content = 'changed';
      }).toThrow(TypeError);
    }
    const third = parser.parse(body([['tools', tools]], [...history, { role: 'user', content: 'again' }, { role: 'user', content: 'third' }], []));
    expect(third.tools).toEqual(tools);
    expect(parser.reuse.bodies).toBe(2);
    expect((third.messages as { content: string }[]).map((m) => m.content).slice(1)).toEqual(['hello', 'again', 'third']);
  });

  it('keeps at most its budget of body bytes', () => {
    const budget = 4 * (MIN_REUSE_BYTES + 1024);
    const parser = new BodyParser(budget);
    for (let i = 0; i < 40; i++) {
      parser.parse(body([['model', 'm']], conversation([{ role: 'user', content: `question ${i}` }]), []));
      expect(parser.keptBytes).toBeLessThanOrEqual(budget);
    }
    expect(parser.keptBytes).toBeGreaterThan(0);
  });

  it('keeps nothing with a budget of 0', () => {
    const parser = new BodyParser(0);
    const history = conversation([{ role: 'user', content: 'hello' }]);
    check(parser, body([['model', 'm']], history, []));
    check(parser, body([['model', 'm']], [...history, { role: 'user', content: 'again' }], []));
    expect(parser.reuse).toEqual({ bodies: 0, bytes: 0 });
    expect(parser.keptBytes).toBe(0);
  });

  it('names the field nested too deep in a new turn, with its index in the whole body', () => {
    const parser = new BodyParser(DEFAULTS.limits.bodyReuseBytes);
    const history = conversation([{ role: 'user', content: 'hello' }]);
    parser.parse(body([['model', 'm']], history, []));
    let deep: unknown = 1;
    for (let i = 0; i < 70; i++) deep = [deep];
    const raw = body([['model', 'm']], [...history, { role: 'user', content: deep }], []);
    expect(failure(() => parser.parse(raw))).toBe(failure(() => parseJsonBody(raw)));
    expect(failure(() => parser.parse(raw))).toContain('messages[2].content');
    // Tool-call arguments sent as JSON text count at the depth of the field that holds them.
    const call = { id: 'c', type: 'function', function: { name: 'run', arguments: '['.repeat(60) + ']'.repeat(60) } };
    const args = body([['model', 'm']], [...history, { role: 'assistant', content: null, tool_calls: [call] }], []);
    expect(failure(() => parser.parse(args))).toBe(failure(() => parseJsonBody(args)));
    expect(failure(() => parser.parse(args))).toContain('messages[2].tool_calls[0].function.arguments');
    // And a member after the messages.
    const late = body([['model', 'm']], [...history, { role: 'user', content: 'more' }], [['tools', deep]]);
    expect(failure(() => parser.parse(late))).toBe(failure(() => parseJsonBody(late)));
    expect(failure(() => parser.parse(late))).toContain('tools');
  });
});
