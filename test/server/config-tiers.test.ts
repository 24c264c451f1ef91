// tier_weights: what a cached block in each storage tier is worth, at the top level and per model.
import { describe, expect, it } from 'vitest';
import { configFromDocument } from '../../server/config/load.js';
import { configFailure as failure } from '../helpers/config-failure.js';

const worker = (over: Record<string, unknown> = {}) => ({ id: 'w0', url: 'http://10.0.0.5:8000', model: 'llama', ...over });


describe('tier_weights', () => {
  it('defaults to GPU 1, CPU 0.75, disk 0.25', () => {
    expect(configFromDocument({ workers: [worker()] }, {}).models[0]!.tierWeights).toEqual({ gpu: 1, cpu: 0.75, disk: 0.25 });
  });

  it('may be set in part at the top level and overridden per model, the rest inherited', () => {
    const config = configFromDocument(
      {
        tier_weights: { cpu: 0.5 },
        models: [{ name: 'a' }, { name: 'b', tier_weights: { disk: 0 } }],
        workers: [worker({ model: 'a' }), worker({ id: 'w1', model: 'b' })],
      },
      {},
    );
    expect(config.models.map((m) => m.tierWeights)).toEqual([
      { gpu: 1, cpu: 0.5, disk: 0.25 },
      { gpu: 1, cpu: 0.5, disk: 0 },
    ]);
  });

  it('takes weights in [0, 1] and only the three tiers, naming the field', () => {
    expect(failure({ tier_weights: { cpu: 1.5 }, workers: [worker()] })).toMatch(/^tier_weights\.cpu: must be <= 1/);
    expect(failure({ models: [{ name: 'llama', tier_weights: { disk: -1 } }], workers: [worker()] })).toMatch(/^models\[0\]\.tier_weights\.disk: must be >= 0/);
    expect(failure({ tier_weights: { nvme: 0.5 }, workers: [worker()] })).toMatch(/tier_weights\.nvme/);
    expect(failure({ tier_weights: 0.5, workers: [worker()] })).toMatch(/^tier_weights: /);
  });
});
