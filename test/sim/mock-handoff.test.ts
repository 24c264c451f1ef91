// The mock workers' side of the handoff over real HTTP: the fields vLLM's
// prefill answer carries, a decode that pulls KV from its prefill worker (and
// fails without one), SGLang's bootstrap room, and the transfer time.
import { afterEach, describe, expect, it } from 'vitest';
import { startMockServer, type MockServer } from '../../sim/mocker/http-server.js';
import { transferMs } from '../../sim/mocker/kv-handoff.js';

const servers: MockServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});
async function mock(role: 'prefill' | 'decode' | 'both', protocol: 'vllm' | 'sglang' = 'vllm', extra: Record<string, number> = {}) {
  const s = await startMockServer({ handoff: { role, protocol, ...extra }, engine: { blockSize: 16, speedup: 50 } });
  servers.push(s);
  return s;
}
const ids = (n: number) => Array.from({ length: n }, (_, i) => 1 + i);
const post = async (url: string, body: unknown) => {
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

describe('mock handoff (vLLM fields)', () => {
  it('a prefill answer names its KV; the decode pulls it once and computes only the partial block', async () => {
    const [p, d] = [await mock('prefill'), await mock('decode')];
    const prefill = await post(p.url, { prompt: ids(100), max_tokens: 1, kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false } });
    expect(prefill.status).toBe(200);
    const params = prefill.body.kv_transfer_params;
    expect(params).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_host: '127.0.0.1', remote_port: p.port, tp_size: 1 });
    expect(params.remote_block_ids).toHaveLength(6);
    expect(typeof params.remote_engine_id).toBe('string');
    expect(typeof params.remote_request_id).toBe('string');
    const decode = await post(d.url, { prompt: ids(100), max_tokens: 5, kv_transfer_params: params });
    expect(decode.status).toBe(200);
    expect(decode.body.usage.completion_tokens).toBe(5);
    expect(d.engine.stats()).toMatchObject({ receivedTokens: 96, admittedPromptTokens: 100 });
    // Taken once: the same params again find nothing to pull.
    const again = await post(d.url, { prompt: ids(100), max_tokens: 5, kv_transfer_params: params });
    expect(again.status).toBe(500);
    expect(again.body.error.message).toMatch(/KV transfer from 127\.0\.0\.1:\d+ failed: no KV is kept for/);
  });

  it('refuses a decode without the fields it pulls by, and roles the worker does not have', async () => {
    const [p, d] = [await mock('prefill'), await mock('decode')];
    const bad = await post(d.url, { prompt: ids(40), kv_transfer_params: { do_remote_prefill: true, remote_engine_id: 'e', remote_host: 'h', remote_port: 1 } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/kv_transfer_params\.remote_request_id: must be a string/);
    expect((await post(d.url, { prompt: ids(40), kv_transfer_params: { do_remote_decode: true } })).status).toBe(400);
    // Without kv_transfer_params any vLLM worker runs the request whole.
    expect((await post(p.url, { prompt: ids(40), max_tokens: 2 })).status).toBe(200);
    expect((await post(d.url, { prompt: ids(40), max_tokens: 2 })).status).toBe(200);
  });
});

describe('mock handoff (SGLang fields)', () => {
  it('the decode waits for its room on the prefill server, then decodes', async () => {
    const [p, d] = [await mock('prefill', 'sglang'), await mock('decode', 'sglang')];
    const body = { prompt: ids(200), max_tokens: 4, bootstrap_host: '127.0.0.1', bootstrap_port: p.port, bootstrap_room: 2 ** 52 + 3 };
    // The decode asks first and waits; the prefill comes later.
    const decoding = post(d.url, body);
    const prefill = await post(p.url, body);
    expect(prefill.status).toBe(200);
    expect(prefill.body.usage.completion_tokens).toBe(1);
    const decode = await decoding;
    expect(decode.status).toBe(200);
    expect(decode.body.usage.completion_tokens).toBe(4);
    expect(d.engine.stats().receivedTokens).toBe(192);
  });

  it('a prefill-mode or decode-mode server needs the bootstrap fields; a plain one ignores them', async () => {
    const [p, b] = [await mock('prefill', 'sglang'), await mock('both', 'sglang')];
    const missing = await post(p.url, { prompt: ids(20), bootstrap_host: '127.0.0.1', bootstrap_port: 1 });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/bootstrap_room/);
    expect((await post(b.url, { prompt: ids(20), max_tokens: 2 })).status).toBe(200);
  });
});

describe('transferMs', () => {
  it('is bytes per token x tokens over the bandwidth', () => {
    expect(transferMs(1000, { kvBytesPerToken: 131_072, kvBandwidth: 25e9 })).toBeCloseTo(5.24288, 6);
    expect(transferMs(0, { kvBytesPerToken: 1, kvBandwidth: 1 })).toBe(0);
  });
});
