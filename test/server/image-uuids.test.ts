// The router's identifier written as the uuid of each forwarded image that
// has none: only those parts change, a client's uuid is kept, and every
// other byte of the body goes as it came.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { withImageUuids } from '../../server/request/image-uuids.js';
import { givenUuid } from '../../server/request/media.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const image = (url: string, extra: Record<string, unknown> = {}) => ({ type: 'image_url', image_url: { url }, ...extra });
/** The body forwarded, given the router's identifiers as promptIds gives them (computed here by hand: the uuid, else the URL's digest). */
function forward(text: string) {
  const body = JSON.parse(text) as { messages: { content: unknown }[] };
  const parts = body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((p: { type?: string }) => p.type === 'image_url');
  const ids = parts.map((p: { uuid?: unknown; image_url: { url: string } }) => (typeof p.uuid === 'string' ? p.uuid : sha256(p.image_url.url)));
  return withImageUuids(Buffer.from(text), body as unknown as Record<string, unknown>, ids);
}

describe('withImageUuids', () => {
  it("gives an image without a uuid the digest of its URL, keeps a client's uuid, and leaves the other bytes as they came", () => {
    const system = '{ "role" : "system", "content": "Be brief." }';
    const text =
      '{"model":"vl","seed":12345678901234567890,\n "messages": [ ' +
      system +
      ` ,\n  {"role":"user","content":[${JSON.stringify(image('data:image/png;base64,AAAA'))},${JSON.stringify(image('https://x.example/b.png', { uuid: 'client-7' }))},{"type":"text","text":"Which?"}]} ],\n "max_tokens": 1.50 }`;
    const out = forward(text)!;
    const sent = out.raw.toString();
    expect(sent.startsWith('{"model":"vl","seed":12345678901234567890,\n "messages": [ ' + system + ' ,\n  {')).toBe(true);
    expect(sent.endsWith('} ],\n "max_tokens": 1.50 }')).toBe(true);
    const parts = (JSON.parse(sent) as { messages: { content: { uuid?: string }[] }[] }).messages[1]!.content;
    expect(parts.map((p) => p.uuid)).toEqual([sha256('data:image/png;base64,AAAA'), 'client-7', undefined]);
    expect(JSON.parse(sent)).toEqual(out.body);
  });

  it("writes the identifiers it is given (the router's media ids), in the order of the image parts", () => {
    const body = { messages: [{ role: 'user', content: [image('data:,a'), { type: 'text', text: 'x' }] }, { role: 'user', content: [image('data:,b', { uuid: 'kept' }), image('data:,c')] }] };
    const sent = JSON.parse(withImageUuids(Buffer.from(JSON.stringify(body)), body, ['id-a', 'kept', 'id-c'])!.raw.toString()) as typeof body;
    expect(sent.messages.flatMap((m) => m.content.map((p) => (p as { uuid?: string }).uuid))).toEqual(['id-a', undefined, 'kept', 'id-c']);
    expect(() => withImageUuids(Buffer.from(JSON.stringify(body)), body, ['id-a'])).toThrow(/1 image identifiers for 3 image parts/);
  });

  it('keeps the body whole when every image has a uuid, or there is none', () => {
    expect(forward(JSON.stringify({ model: 'vl', messages: [{ role: 'user', content: [image('data:,x', { uuid: '' })] }] }))).toBeNull();
    expect(forward(JSON.stringify({ model: 'vl', messages: [{ role: 'user', content: 'no image' }] }))).toBeNull();
  });

  it('reads a null uuid as none, as vLLM does, and leaves one of another type to the engine', () => {
    const out = forward(JSON.stringify({ messages: [{ role: 'user', content: [image('data:,a', { uuid: null }), image('data:,b', { uuid: true })] }] }))!;
    const parts = (JSON.parse(out.raw.toString()) as { messages: { content: { uuid?: unknown }[] }[] }).messages[0]!.content;
    expect(parts.map((p) => p.uuid)).toEqual([sha256('data:,a'), true]);
  });

  it('writes into the messages JSON.parse keeps when the key is repeated', () => {
    const text = `{"messages":[{"role":"user","content":"first"}],"messages":[{"role":"user","content":[${JSON.stringify(image('data:,c'))}]}]}`;
    const sent = JSON.parse(forward(text)!.raw.toString()) as { messages: { content: { uuid: string }[] }[] };
    expect(sent.messages[0]!.content[0]!.uuid).toBe(sha256('data:,c'));
  });

  it('gives the same result however the body is spaced (property)', () => {
    const message = fc.oneof(
      fc.record({ role: fc.constant('user'), content: fc.string() }),
      fc.record({
        role: fc.constant('user'),
        content: fc.array(fc.oneof(fc.record({ type: fc.constant('text'), text: fc.string() }), fc.string().map((s) => image(`data:,${s}`)), fc.string().map((s) => image(`data:,${s}`, { uuid: s }))), { maxLength: 4 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), fc.constantFrom(0, 1, '\t', ' \n '), (messages, indent) => {
        const body = { model: 'vl', messages, stream: false };
        const out = forward(JSON.stringify(body, null, indent));
        const expected = messages.map((m) =>
          Array.isArray(m.content) ? { ...m, content: m.content.map((p) => ('image_url' in p && !('uuid' in p) ? { ...p, uuid: sha256(p.image_url.url) } : p)) } : m,
        );
        const changed = JSON.stringify(expected) !== JSON.stringify(messages);
        if (!changed) return out === null;
        return out !== null && JSON.stringify(JSON.parse(out.raw.toString())) === JSON.stringify({ ...body, messages: expected });
      }),
    );
  });
});

describe('givenUuid', () => {
  it("takes the part's own uuid as vLLM does: any string, an integer as its digits, none inside image_url", () => {
    expect(givenUuid(image('data:,a', { uuid: 'sku-1' }))).toBe('sku-1');
    expect(givenUuid(image('data:,a', { uuid: '' }))).toBe('');
    expect(givenUuid(image('data:,a', { uuid: 42 }))).toBe('42');
    expect(givenUuid({ type: 'image_url', image_url: { url: 'data:,a', uuid: 'inner' } })).toBeNull();
    expect(givenUuid(image('data:,a', { uuid: null }))).toBeNull();
  });
});
