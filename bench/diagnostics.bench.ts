// What the diagnostics cost on the router's two hot paths, measured on the
// real Diagnostics of a runtime (one model, two workers without event
// sockets): per dispatched streamed request (the dispatch tap, its prompt
// digest, 17 relayed SSE chunks and the usage read at the end), and per KV
// batch of one stored event of 16 blocks (while the rank's digest still
// checks stores, and once a store reproduced a routed prompt).
//
//   diagnostics_us_per_streamed_request(_checking)  p50 µs, rank confirmed (unconfirmed)
//   kv_batch_index_apply_us vs kv_batch_with_diagnostics_us  p50 µs, side by side
//   kv_batch_with_diagnostics_checking_us  p50 µs, the store re-hashed for the digest
import { configFromDocument } from '../server/config/load.js';
import { createRuntime } from '../server/runtime.js';
import type { KvEventBatch } from '../router/kv-events.js';
import { plainFields } from '../router/model-fleet.js';
import type { BenchSuite, Figure } from './figures.js';
import { percentile, round, sampleMicros, sideBySide } from './stats.js';

const BLOCK_SIZE = 16;

export const diagnosticsSuite: BenchSuite = {
  name: 'diagnostics',
  async run({ quick }): Promise<Figure[]> {
    const config = configFromDocument({
      models: [{ name: 'm', tokenizer: 'bytes', block_size: BLOCK_SIZE }],
      workers: [
        { id: 'w0', url: 'http://127.0.0.1:9', model: 'm' },
        { id: 'w1', url: 'http://127.0.0.1:9', model: 'm' },
      ],
    });
    const rt = await createRuntime(config, () => {});
    try {
      const diagnostics = rt.diagnostics!;
      const model = rt.models.get('m')!;
      const prompt = Uint32Array.from({ length: 2048 }, (_, i) => i % 50_000);
      const request = model.route.fleet.prepare(plainFields('bench'), prompt);
      const admission = { worker: { id: 'w0', rank: 0 }, overlapBlocks: 64, cachedTokens: 1024 };
      const token = Buffer.from(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":" word"}}]}\n\n`);
      const usage = Buffer.from(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[],"usage":{"prompt_tokens":2048,"completion_tokens":16,"total_tokens":2064,"prompt_tokens_details":{"cached_tokens":1024}}}\n\ndata: [DONE]\n\n`);
      const fields = plainFields('bench');
      const streamed = (worker: typeof admission) => () => {
        const tap = diagnostics.dispatched(model, worker, prompt.length, performance.now());
        tap.prompt(request, fields);
        for (let i = 0; i < 16; i++) tap.data(token, true);
        tap.data(usage, true);
        tap.end();
      };
      const samples = quick ? 2000 : 20_000;

      // w0's digest is confirmed by its first store; w1's never sees a matching one, so it keeps checking.
      const tokens = Array.from({ length: 16 * BLOCK_SIZE }, (_, i) => 60_000 + i);
      const stored: KvEventBatch = {
        ts: 0,
        dpRank: 0,
        events: [{ type: 'stored', blockHashes: Array.from({ length: 16 }, (_, i) => BigInt(i + 1)), parentBlockHash: null, tokenIds: tokens, blockSize: BLOCK_SIZE, loraName: null, medium: 'GPU' }],
      };
      const checking = { worker: { id: 'w1', rank: 0 }, overlapBlocks: 0, cachedTokens: 0 };
      const confirmedPrompt = model.route.fleet.prepare(plainFields('bench-2'), Uint32Array.from(tokens));
      diagnostics.dispatched(model, admission, tokens.length, performance.now()).prompt(confirmedPrompt, fields);
      model.route.applyEvents({ id: 'w0', rank: 0 }, stored);

      const confirmedRequest = sampleMicros(streamed(admission), samples, samples / 4);
      const checkingRequest = sampleMicros(streamed(checking), samples, samples / 4);
      const [indexOnly, withDiagnostics] = sideBySide(
        () => void model.route.fleet.applyEvents({ id: 'w0', rank: 0 }, stored),
        () => void model.route.applyEvents({ id: 'w0', rank: 0 }, stored),
        samples,
      );
      const checkedBatch = sampleMicros(() => void model.route.applyEvents({ id: 'w1', rank: 0 }, stored), samples, samples / 4);
      return [
        { key: 'diagnostics_us_per_streamed_request', value: round(percentile(confirmedRequest, 50)), unit: 'µs', note: 'dispatch tap, 17 SSE chunks, usage at the end; the rank confirmed' },
        { key: 'diagnostics_us_per_streamed_request_checking', value: round(percentile(checkingRequest, 50)), unit: 'µs', note: 'the same while the rank is unconfirmed (128 prompt blocks into its digest)' },
        { key: 'kv_batch_index_apply_us', value: round(percentile(indexOnly, 50)), unit: 'µs', note: 'a 16-block store applied to the index alone (baseline)' },
        { key: 'kv_batch_with_diagnostics_us', value: round(percentile(withDiagnostics, 50)), unit: 'µs', note: 'the same through the route with the diagnostics tap, rank confirmed (side by side)' },
        { key: 'kv_batch_with_diagnostics_checking_us', value: round(percentile(checkedBatch, 50)), unit: 'µs', note: 'the same while the rank still re-hashes stores for its digest' },
      ];
    } finally {
      await rt.close();
    }
  },
};
