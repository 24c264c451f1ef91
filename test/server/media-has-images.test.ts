// hasImages decides whether a chat takes the multimodal path; it is asked of
// every chat, often of the frozen message arrays the body parser shares
// between a conversation's turns.
import { describe, expect, it } from 'vitest';
import { hasImages } from '../../server/request/media.js';

const deepFrozen = <T>(value: T): T => {
  if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) deepFrozen(item);
    Object.freeze(value);
  }
  return value;
};

const text = (t: string) => ({ role: 'user', content: t });
const parts = (...content: unknown[]) => ({ role: 'user', content });
const image = { type: 'image_url', image_url: { url: 'https://example.com/a.png' } };

describe('hasImages', () => {
  const cases: [string, unknown[], boolean][] = [
    ['text messages only', [text('a'), text('b')], false],
    ['content parts without an image', [parts({ type: 'text', text: 'a' }), parts({ type: 'input_audio' })], false],
    ['an image in the last message only', [text('a'), text('b'), parts({ type: 'text', text: 'look' }, image)], true],
    ['an image as the first part of the first message', [parts(image), text('b')], true],
    ['null and non-object entries beside an image', [null, 7, 'x', parts(null, image)], true],
    ['null and non-object entries alone', [null, 7, 'x', { role: 'user' }], false],
    ['an object typed image_url that is a message, not a part', [{ type: 'image_url', content: 'a' }], false],
  ];
  for (const [name, messages, expected] of cases) {
    it(`${name}: ${expected}`, () => {
      expect(hasImages(messages)).toBe(expected);
      // The body parser's shared messages are frozen arrays of frozen messages.
      expect(hasImages(deepFrozen(structuredClone(messages)))).toBe(expected);
    });
  }

  it('finds an image past 200 frozen text messages', () => {
    const many = Array.from({ length: 200 }, (_, i) => text(`m${i}`));
    expect(hasImages(deepFrozen([...many]))).toBe(false);
    expect(hasImages(deepFrozen([...many, parts(image)]))).toBe(true);
  });
});
